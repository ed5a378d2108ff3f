"""The engine's NDJSON streams, as async generators (a follower waits on the event loop, not in a
thread): a prepare job's events, and a run's output.

The events stream reads the job's events in order from a position (``Range: events=N-``),
then waits for the ``sqlrs_events`` NOTIFY naming the job (re-reading on a slow timer in case
one was lost: ``pipeline_project.web.ndjson``), and closes once the job's terminal status has
been sent.
"""

import logging
import re

from django.http import StreamingHttpResponse

from jobs.dbstates import selectors
from jobs.dbstates.api.errors import sqlrs_error, sqlrs_error_response
from jobs.dbstates.engine import runs
from jobs.dbstates.models import EVENTS_CHANNEL, TERMINAL_STATUSES
from pipeline_project.api.rendering import json_text
from pipeline_project.web.follow import Read
from pipeline_project.web.ndjson import OPEN_STREAMS, follow_response, ndjson_response

log = logging.getLogger("pipeline.dbstates")

EVENTS_PAGE = 500
RANGE = re.compile(r"^events=(?P<start>[0-9]{1,9})-(?P<end>[0-9]{1,9})?$")
_RUNS_OPEN = OPEN_STREAMS.labels(stream="sqlrs_runs")


def events_response(job_id: str, *, status: str, event_count: int, range_header: str | None):
    """200 with every event, or 206 from the range's start (to its end, if it has one). ``status``
    and ``event_count`` are the job's, read together."""
    match = RANGE.match(range_header.strip()) if range_header else None
    start = int(match["start"]) if match else 0
    end = int(match["end"]) if match and match["end"] else None
    headers = {"Accept-Ranges": "events"}
    code = 200
    if match:
        terminal = status in TERMINAL_STATUSES
        if (end is not None and end < start) or (terminal and start >= event_count):
            return sqlrs_error_response(
                416,
                "range_not_satisfiable",
                f"the job has {event_count} events; asked for {range_header}",
                headers={"Content-Range": f"events */{event_count}"},
            )
        total = str(event_count) if terminal else "*"
        last = end if end is not None else (event_count - 1 if terminal else "*")
        headers["Content-Range"] = f"events {start}-{last}/{total}"
        code = 206
    return follow_response(
        lambda pool: _EventsReader(pool, job_id, start=start, end=end).read,
        stream="sqlrs_events",
        channel=EVENTS_CHANNEL,
        key=job_id,
        status=code,
        headers=headers,
    )


class _EventsReader:
    """A prepare job's events from a position (to an end, if the range has one), a page a read,
    until the job's terminal status has been read."""

    def __init__(self, pool, job_id: str, *, start: int, end: int | None):
        self.pool, self.job_id, self.position, self.end = pool, job_id, start, end
        self.final = False  # the job ended: one more read, for the status event written with its status

    async def read(self, _received) -> Read:
        limit = EVENTS_PAGE if self.end is None else min(EVENTS_PAGE, self.end + 1 - self.position)
        events = await selectors.prepare_job_events_page(
            pool=self.pool, job_id=self.job_id, start=self.position, limit=limit
        )
        self.position += len(events)
        if self.end is not None and self.position > self.end:
            return Read(events, done=True)
        if len(events) == limit:
            return Read(events, more=True)
        if self.final:
            return Read(events, done=True)
        progress = await selectors.prepare_job_progress(pool=self.pool, job_id=self.job_id)
        if progress is None:
            return Read(events, done=True)
        self.final = progress[0] in TERMINAL_STATUSES
        return Read(events, more=self.final)


def run_response(plan: runs.RunPlan) -> StreamingHttpResponse:
    return ndjson_response(_run_lines(plan))


async def _run_lines(plan: runs.RunPlan):
    _RUNS_OPEN.inc()
    try:
        async for event in runs.run_events(plan):
            yield json_text(event) + "\n"
    except Exception:  # the headers are sent: the client hears of it as the stream's last event
        log.exception("a run failed", extra={"instance_id": plan.instance_id})
        error = sqlrs_error("internal_error", "the run failed in the engine; its log says why")
        yield json_text(runs.error_event(error)) + "\n"
    finally:
        _RUNS_OPEN.dec()
