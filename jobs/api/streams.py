"""The job events stream: NDJSON, one event per line, following the job until it finishes.

An async generator, so a follower waits on the event loop, not in a thread: it reads with a
pooled connection, then waits on the process's notification hub for the ``dl_job_events``
NOTIFY naming its job (sent by the statement that wrote the events), re-reading on a slow
timer too in case a notification was lost (``pipeline_project.core.follow``). It ends when the
job is finished (after one more read, for the events written with the final status), after
``DL_EVENTS_MAX_FOLLOW_SEC`` (the client resumes with ``after``), or when the client goes away
(Django cancels it).
"""

import json
import time
from contextlib import AsyncExitStack

from django.conf import settings
from django.http import StreamingHttpResponse
from prometheus_client import Gauge

from jobs import selectors
from jobs.models import EVENTS_CHANNEL, FINISHED_STATUSES
from pipeline_project.core.follow import Read, follow
from pipeline_project.core.notifications import waiting_resources

EVENTS_PAGE = 500
NDJSON = "application/x-ndjson"

OPEN_STREAMS = Gauge(
    "http_event_streams_open", "Event streams being followed right now.", ["stream"], multiprocess_mode="livesum"
)
_JOB_EVENTS_OPEN = OPEN_STREAMS.labels(stream="job_events")


def events_response(job_id, *, after: int, follow: bool) -> StreamingHttpResponse:
    return StreamingHttpResponse(
        _event_lines(job_id, after=after, following=follow),
        content_type=NDJSON,
        headers={"X-Accel-Buffering": "no", "Cache-Control": "no-store"},
    )


async def _event_lines(job_id, *, after: int, following: bool):
    deadline = time.monotonic() + settings.DL_EVENTS_MAX_FOLLOW_SEC
    _JOB_EVENTS_OPEN.inc()
    try:
        async with AsyncExitStack() as stack:
            resources = await stack.enter_async_context(waiting_resources())
            subscription = None
            if following:  # subscribed before the first read: nothing written after it is missed
                subscription = await stack.enter_async_context(resources.hub.subscribe(EVENTS_CHANNEL, [str(job_id)]))
            reader = _EventsReader(resources.pool, job_id, after=after, following=following)
            events = follow(subscription, reader.read, deadline=deadline, recheck_sec=settings.DL_EVENTS_RECHECK_SEC)
            stack.push_async_callback(events.aclose)
            async for event in events:
                yield json.dumps(event) + "\n"
    finally:
        _JOB_EVENTS_OPEN.dec()


class _EventsReader:
    """A job's events from a position, a page a read, until the job is finished."""

    def __init__(self, pool, job_id, *, after: int, following: bool):
        self.pool, self.job_id, self.after, self.following = pool, job_id, after, following
        self.final = False  # the job is finished: one more read, for the events written with its status

    async def read(self, _received) -> Read:
        events = await selectors.job_events_page(
            pool=self.pool, job_id=self.job_id, after=self.after, limit=EVENTS_PAGE
        )
        if events:
            self.after = events[-1]["event_id"]
        if len(events) == EVENTS_PAGE:
            return Read(events, more=True)
        if not self.following or self.final:
            return Read(events, done=True)
        status = await selectors.job_status_of(pool=self.pool, job_id=self.job_id)
        if status is None:
            return Read(events, done=True)
        self.final = status in FINISHED_STATUSES
        return Read(events, more=self.final)
