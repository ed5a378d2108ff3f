"""The job events stream: NDJSON, one event per line, following the job until it finishes
(``pipeline_project.web.ndjson``): woken by the ``dl_job_events`` NOTIFY naming its job (sent
by the statement that wrote the events), it ends when the job is finished, after one more read
for the events written with the final status."""

from django.http import StreamingHttpResponse

from jobs.queue import selectors
from jobs.queue.models import EVENTS_CHANNEL
from jobs.queue.states import FINISHED
from pipeline_project.web.follow import Read
from pipeline_project.web.ndjson import follow_response

EVENTS_PAGE = 500


def events_response(job_id, *, after: int, follow: bool) -> StreamingHttpResponse:
    return follow_response(
        lambda pool: _EventsReader(pool, job_id, after=after, following=follow).read,
        stream="job_events",
        channel=EVENTS_CHANNEL,
        key=str(job_id) if follow else None,
    )


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
        self.final = status in FINISHED
        return Read(events, more=self.final)
