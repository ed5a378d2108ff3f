"""The jobs queue (seed 002): trigger, status, cancel, the list, the event stream, and the
operators' actions (retry, cancel or delete by filter; pause and resume a queue)."""

from __future__ import annotations  # ``Jobs.list`` would otherwise stand for ``list`` in the annotations below it

import dataclasses
import json
import uuid
from collections.abc import Iterable, Iterator
from datetime import datetime
from urllib.parse import parse_qsl, quote, urlsplit

import httpx

from pipeline_client.models import (
    Counts,
    Enqueued,
    Job,
    JobEvent,
    JobSpec,
    QueueChange,
    QueueState,
    parsed,
    to_json,
)
from pipeline_client.session import Session

MAX_BULK = 1000  # the most jobs one bulk trigger takes
JOBS = "api/v1/jobs"
QUEUES = "api/v1/queues"


class Jobs:
    def __init__(self, session: Session):
        self._session = session

    def trigger(self, queue: str, task: str, *, lock_key: str, **fields) -> Enqueued:
        """Enqueue a job (``fields``: the rest of :class:`JobSpec`). Without an ``idempotency_key``
        the call makes one, so that its retries return the job the first attempt enqueued."""
        spec = _keyed(JobSpec(queue=queue, task=task, lock_key=lock_key, **fields))
        answer = self._session.call("POST", f"{JOBS}/trigger", json=spec.body())
        return parsed(Enqueued, {**answer, "idempotency_key": spec.idempotency_key})

    def trigger_many(self, specs: Iterable[JobSpec]) -> list[Enqueued]:
        """Enqueue many jobs, ``MAX_BULK`` a request (each request all or nothing), keyed as :meth:`trigger` keys one."""
        keyed = [_keyed(spec) for spec in specs]
        enqueued = []
        for start in range(0, len(keyed), MAX_BULK):
            chunk = keyed[start : start + MAX_BULK]
            answer = self._session.call("POST", f"{JOBS}/trigger/bulk", json={"jobs": [spec.body() for spec in chunk]})
            for spec, item in zip(chunk, answer["jobs"], strict=True):
                enqueued.append(parsed(Enqueued, {**item, "idempotency_key": spec.idempotency_key}))
        return enqueued

    def status(self, job_id: str) -> Job:
        return parsed(Job, self._session.call("GET", f"{JOBS}/{_segment(job_id)}/status"))

    def cancel(self, job_id: str) -> Job:
        """A queued job is canceled at once, a running one is asked to stop between chunks; 409 once finished."""
        return parsed(Job, self._session.call("POST", f"{JOBS}/{_segment(job_id)}/cancel"))

    def list(self, *, limit: int | None = None, **filters) -> Iterator[Job]:
        """Every job the filters match (:func:`job_filters`), newest first, ``limit`` a page."""
        params = job_filters(**filters)
        if limit is not None:
            params["limit"] = limit
        for answer in _pages(self._session, JOBS, params):
            yield from (parsed(Job, item) for item in answer["results"])

    def events(self, job_id: str, *, after: int = 0) -> list[JobEvent]:
        """The job's journal after event ``after``, as it is now."""
        return list(self._stream(job_id, after=after, follow=False))

    def follow(self, job_id: str, *, after: int = 0) -> Iterator[JobEvent]:
        """The job's events after ``after`` as they are written, until the job is finished. The
        service closes a stream now and then (and a connection may break): it is resumed from the
        last event received."""
        failures = 0
        while True:
            try:
                for event in self._stream(job_id, after=after, follow=True):
                    after, failures = event.event_id, 0
                    yield event
            except httpx.TransportError:  # broken mid-stream (opening it was retried already)
                failures += 1
                if failures > self._session.retries:
                    raise
                self._session.wait_before_retry(failures)
                continue
            if self.status(job_id).finished:
                return

    def retry_matching(self, *, dry_run: bool = False, every_job: bool = False, **filters) -> Counts:
        """Retry every failed, canceled or lost job the filters match (``every_job``: with no filter). Needs ``operate``."""
        return self._act_on_matching("retry", filters, dry_run=dry_run, every_job=every_job)

    def cancel_matching(self, *, dry_run: bool = False, every_job: bool = False, **filters) -> Counts:
        """Cancel every queued or running job the filters match. Needs ``operate``."""
        return self._act_on_matching("cancel", filters, dry_run=dry_run, every_job=every_job)

    def delete_matching(
        self, *, dry_run: bool = False, every_job: bool = False, force: bool = False, **filters
    ) -> Counts:
        """Delete every job the filters match (running ones only with ``force``). Needs ``operate``."""
        return self._act_on_matching("delete", filters, dry_run=dry_run, every_job=every_job, force=force)

    def queues(self) -> list[QueueState]:
        return [parsed(QueueState, item) for item in self._session.call("GET", QUEUES)]

    def pause(self, queue: str, *, create: bool = False) -> QueueChange:
        """No worker claims from the queue from now on; running jobs finish. Needs ``operate``.
        A queue nothing has named yet is a NotFoundError (a typo) unless ``create``."""
        path = f"{QUEUES}/{_segment(queue, keep='/')}/pause"
        return parsed(QueueChange, self._session.call("POST", path, json={"create": True} if create else None))

    def resume(self, queue: str) -> QueueChange:
        """Needs ``operate``."""
        return parsed(QueueChange, self._session.call("POST", f"{QUEUES}/{_segment(queue, keep='/')}/resume"))

    def _act_on_matching(self, action: str, filters: dict, *, every_job: bool, **options) -> Counts:
        body = {"filters": job_filters(**filters), "all": every_job, **options}
        return parsed(Counts, self._session.call("POST", f"{JOBS}/{action}", json=body))

    def _stream(self, job_id: str, *, after: int, follow: bool) -> Iterator[JobEvent]:
        params = {"after": after, "follow": "true" if follow else "false"}
        with self._session.stream(f"{JOBS}/{_segment(job_id)}/events", params=params) as response:
            for line in response.iter_lines():
                if line:
                    yield parsed(JobEvent, json.loads(line))


def job_filters(
    *,
    queue: str | None = None,
    task: str | None = None,
    status: str | list[str] | None = None,
    lock_key: str | None = None,
    partition_key: str | None = None,
    idempotency_key: str | None = None,
    args: dict | None = None,
    error: str | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
) -> dict:
    """The list's filters as the API takes them: ``status`` one or many, ``args`` a JSON object the
    jobs' args contain, ``error`` text their error contains."""
    filters = {
        "queue": queue,
        "task": task,
        "status": [status] if isinstance(status, str) else status,
        "lock_key": lock_key,
        "partition_key": partition_key,
        "idempotency_key": idempotency_key,
        "args": None if args is None else json.dumps(args),
        "error": error,
        "created_after": to_json(created_after),
        "created_before": to_json(created_before),
    }
    return {name: value for name, value in filters.items() if value is not None}


def _keyed(spec: JobSpec) -> JobSpec:
    if spec.idempotency_key is not None:
        return spec
    return dataclasses.replace(spec, idempotency_key=f"pipeline-client:{uuid.uuid4()}")


def _segment(value: str, *, keep: str = "") -> str:
    return quote(str(value), safe=keep)


def _pages(session: Session, path: str, params: dict) -> Iterator[dict]:
    """A cursor-paginated list's pages. Each ``next`` link is followed by its query only, on this
    client's base URL: behind a proxy the service may not know the address it is reached at."""
    while True:
        answer = session.call("GET", path, params=params)
        yield answer
        if not answer.get("next"):
            return
        params = parse_qsl(urlsplit(answer["next"]).query, keep_blank_values=True)
