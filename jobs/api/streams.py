"""The job events stream: NDJSON, one event per line, following the job until it finishes.

An async generator, so a follower waits on the event loop, not in a thread: it reads with a
pooled connection, then waits on the process's notification hub for the ``dl_job_events``
NOTIFY naming its job (sent by the statement that wrote the events), re-reading on a slow
timer too in case a notification was lost. It ends when the job is finished (after one more
read, for the events written with the final status), after ``DL_EVENTS_MAX_FOLLOW_SEC``
(the client resumes with ``after``), or when the client goes away (Django cancels it).
"""

import json
import time
from contextlib import AsyncExitStack

from django.conf import settings
from django.http import StreamingHttpResponse
from prometheus_client import Gauge

from jobs import selectors
from jobs.models import EVENTS_CHANNEL, FINISHED_STATUSES
from pipeline_project.core.notifications import waiting_resources

EVENTS_PAGE = 500
NDJSON = "application/x-ndjson"

OPEN_STREAMS = Gauge(
    "http_event_streams_open", "Event streams being followed right now.", ["stream"], multiprocess_mode="livesum"
)
_JOB_EVENTS_OPEN = OPEN_STREAMS.labels(stream="job_events")


def events_response(job_id, *, after: int, follow: bool) -> StreamingHttpResponse:
    return StreamingHttpResponse(
        _event_lines(job_id, after=after, follow=follow),
        content_type=NDJSON,
        headers={"X-Accel-Buffering": "no", "Cache-Control": "no-store"},
    )


async def _event_lines(job_id, *, after: int, follow: bool):
    deadline = time.monotonic() + settings.DL_EVENTS_MAX_FOLLOW_SEC
    _JOB_EVENTS_OPEN.inc()
    try:
        async with AsyncExitStack() as stack:
            resources = await stack.enter_async_context(waiting_resources())
            new_events = None
            if follow:  # subscribed before the first read: nothing written after it is missed
                new_events = await stack.enter_async_context(resources.hub.subscribe(EVENTS_CHANNEL, [str(job_id)]))
            while True:
                events = await selectors.job_events_page(
                    pool=resources.pool, job_id=job_id, after=after, limit=EVENTS_PAGE
                )
                for event in events:
                    yield json.dumps(event) + "\n"
                    after = event["event_id"]
                if len(events) == EVENTS_PAGE:
                    continue
                if new_events is None:
                    return
                status = await selectors.job_status_of(pool=resources.pool, job_id=job_id)
                remaining = deadline - time.monotonic()
                if status is None or remaining <= 0:
                    return
                if status in FINISHED_STATUSES:
                    new_events = None  # the finishing statement wrote its event with the status: read once more
                    continue
                await new_events.wait(timeout=min(settings.DL_EVENTS_RECHECK_SEC, remaining))
    finally:
        _JOB_EVENTS_OPEN.dec()
