"""State changes of prepare jobs: submit, events, status, cancel, retention (seed 1.3, 2.1; their
deletion: ``deletions``).

A job's status and the events that report it are written in one transaction, under the
job's row lock, so the events stream never shows a status the job does not have, and the
API (cancel) and the worker running the job never interleave their writes.
"""

import uuid
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from jobs.dbstates.engine import images, prepare_args, steps
from jobs.dbstates.engine.plans import PlannedTask
from jobs.dbstates.engine.steps import PrepareRequest
from jobs.dbstates.models import EventType, PrepareEvent, PrepareJob, PrepareStatus, PrepareTask
from jobs.queue.selectors import unfinished_job_ids
from jobs.queue.services import JobSpec, Selection, job_enqueue, jobs_cancel
from pipeline_project.api.errors import InvalidInputError, NotFoundError

PREPARE_TASK = "sqlrs.prepare"
MAX_IMAGE_ID = 300


@dataclass
class NewEvent:
    """An event to append to a prepare job's journal (a PrepareEvent's fields)."""

    type: str
    task_id: str = ""
    status: str = ""
    message: str = ""
    result: dict | None = None
    error: dict | None = None


def error_of(code: str, message: str, details: str = "") -> dict:
    """sqlrs's ErrorResponse: ``details`` is text."""
    return {"code": code, "message": message, **({"details": details} if details else {})}


def prepare_request_check(*, request: PrepareRequest):
    """A prepare request checked and normalized (what a job and a cache explanation start from):
    a PsqlRequest, or a LiquibaseRequest for ``lb``."""
    if request.source_manifest is not None:
        raise InvalidInputError("source_manifest is for remote engines; give absolute paths", code="invalid_argument")
    if not request.image_id.strip() or len(request.image_id) > MAX_IMAGE_ID:
        raise InvalidInputError(
            f"image_id is required, at most {MAX_IMAGE_ID} characters (for example postgres:15)",
            code="invalid_argument",
        )
    normalized = steps.request_normalize(request)
    if isinstance(normalized, prepare_args.PsqlRequest):
        for step in normalized.steps:  # a missing or unreadable script is a 400 now, not a failed job later
            prepare_args.step_content_hash(step, stdin=normalized.stdin)
    images.image_resolve(request.image_id)  # an unknown image is a 400 listing the ones there are
    return normalized


def prepare_job_submit(*, request: PrepareRequest) -> PrepareJob:
    """Check the request, store the job and put it on the engine's queue (answered 201 at once)."""
    normalized = prepare_request_check(request=request)
    job_id = uuid.uuid4().hex
    with transaction.atomic():
        job = PrepareJob.objects.create(
            job_id=job_id,
            prepare_kind=request.prepare_kind,
            image_id=request.image_id,
            plan_only=bool(request.plan_only),  # not asked: a prepare that makes an instance
            request=request.stored(),
            prepare_args_normalized=normalized.normalized,
        )
        queued = job_enqueue(
            spec=JobSpec(
                queue=settings.SQLRS_QUEUE,
                task=PREPARE_TASK,
                lock_key=f"sqlrs:{job_id}",
                args={"job_id": job_id},
                max_attempts=3,
                producer="sqlrs",
            )
        )
        PrepareJob.objects.filter(job_id=job_id).update(queue_job_id=queued.job_id)
        _events_add(job_id, [NewEvent(EventType.STATUS, status=PrepareStatus.QUEUED)])
    job.queue_job_id = queued.job_id
    return job


def _events_add(job_id: str, events: list[NewEvent]) -> None:
    """Append events in order (the caller holds the job's row lock, or just created the job)."""
    last = PrepareEvent.objects.filter(job_id=job_id).aggregate(last=Max("seq"))["last"]
    start = 0 if last is None else last + 1
    PrepareEvent.objects.bulk_create(
        PrepareEvent(job_id=job_id, seq=start + i, **event.__dict__) for i, event in enumerate(events)
    )


def _locked(job_id: str) -> PrepareJob | None:
    return PrepareJob.objects.select_for_update().filter(job_id=job_id).first()


def job_events_add(*, job_id: str, events: list[NewEvent]) -> None:
    with transaction.atomic():
        if _locked(job_id) is not None:
            _events_add(job_id, events)


def job_log(*, job_id: str, task_id: str, lines: list[str]) -> None:
    job_events_add(job_id=job_id, events=[NewEvent(EventType.LOG, task_id=task_id, message=line) for line in lines])


def job_start(*, job_id: str) -> PrepareJob | None:
    """The worker took the job: queued → running. None if it is over (canceled meanwhile)."""
    with transaction.atomic():
        job = _locked(job_id)
        if job is None or job.is_terminal:
            return None
        if job.status == PrepareStatus.QUEUED:
            job.status, job.started_at = PrepareStatus.RUNNING, timezone.now()
            job.save(update_fields=["status", "started_at"])
            _events_add(job_id, [NewEvent(EventType.STATUS, status=PrepareStatus.RUNNING)])
        return job


def job_plan_store(*, job_id: str, resolved_image_id: str, signature: str, tasks: list[PlannedTask]) -> None:
    """Store the plan: its tasks (queued, or succeeded for those planning did) with their events."""
    with transaction.atomic():
        if _locked(job_id) is None:
            return
        PrepareJob.objects.filter(job_id=job_id).update(resolved_image_id=resolved_image_id, signature=signature)
        now = timezone.now()
        PrepareTask.objects.bulk_create(
            PrepareTask(
                job_id=job_id,
                position=i,
                task_id=task.task_id,
                type=task.type,
                status=PrepareStatus.SUCCEEDED if task.done_when_planned else PrepareStatus.QUEUED,
                started_at=now if task.done_when_planned else None,
                finished_at=now if task.done_when_planned else None,
                **task.columns,
            )
            for i, task in enumerate(tasks)
        )
        _events_add(
            job_id,
            [NewEvent(EventType.TASK, task_id=task.task_id, status=PrepareStatus.QUEUED) for task in tasks]
            + [
                NewEvent(EventType.TASK, task_id=task.task_id, status=PrepareStatus.SUCCEEDED)
                for task in tasks
                if task.done_when_planned
            ],
        )


def task_status_set(*, job_id: str, task_id: str, status: str, cached: bool | None = None) -> None:
    with transaction.atomic():
        if _locked(job_id) is None:
            return
        changes = {"status": status}
        now = timezone.now()
        if status == PrepareStatus.RUNNING:
            changes["started_at"] = now
        elif status in (PrepareStatus.SUCCEEDED, PrepareStatus.FAILED):
            changes["finished_at"] = now
        if cached is not None:
            changes["cached"] = cached
        PrepareTask.objects.filter(job_id=job_id, task_id=task_id).update(**changes)
        _events_add(job_id, [NewEvent(EventType.TASK, task_id=task_id, status=status)])


def job_finish(*, job_id: str, result: dict | None = None, error: dict | None = None) -> bool:
    """End the job: succeeded with ``result`` (may be None for plan-only) or failed with ``error``.
    Tasks left queued or running fail with it. False if it had ended already."""
    with transaction.atomic():
        job = _locked(job_id)
        if job is None or job.is_terminal:
            return False
        status = PrepareStatus.FAILED if error else PrepareStatus.SUCCEEDED
        now = timezone.now()
        events = []
        if error:
            for task_id in PrepareTask.objects.filter(job_id=job_id, status=PrepareStatus.RUNNING).values_list(
                "task_id", flat=True
            ):
                events.append(NewEvent(EventType.TASK, task_id=task_id, status=PrepareStatus.FAILED))
            PrepareTask.objects.filter(job_id=job_id, status=PrepareStatus.RUNNING).update(
                status=PrepareStatus.FAILED, finished_at=now
            )
        PrepareJob.objects.filter(job_id=job_id).update(
            status=status, result=result, error=error, finished_at=now, started_at=job.started_at or now
        )
        if result is not None:
            events.append(NewEvent(EventType.RESULT, result=result))
        if error:
            events.append(NewEvent(EventType.ERROR, error=error, message=error["message"]))
        events.append(NewEvent(EventType.STATUS, status=status))
        _events_add(job_id, events)
    jobs_retention_apply(signature=job.signature)
    return True


def prepare_job_cancel(*, job_id: str) -> bool:
    """Cancel a queued or running job; returns whether it was still going (the caller reads what
    it became: it may have been deleted meanwhile)."""
    job = PrepareJob.objects.filter(job_id=job_id).first()
    if job is None:
        raise NotFoundError(f"prepare job {job_id} not found", code="not_found")
    if job.is_terminal:
        return False
    if job.queue_job_id:
        counts = jobs_cancel(selection=Selection.of_ids([job.queue_job_id]), by="sqlrs")
        if counts.changed:  # it was still queued: no worker will write its end
            job_finish(job_id=job_id, error=error_of("cancelled", "the prepare job was cancelled"))
    return True


def jobs_retention_apply(*, signature: str) -> list[str]:
    """Keep the newest ``orchestrator.jobs.maxIdentical`` finished jobs of a signature; delete the
    others (their directories follow their rows: ``signals``). Returns the deleted ids."""
    from jobs.dbstates.config import config_value

    if not signature:
        return []
    keep = config_value("orchestrator.jobs.maxIdentical")
    finished = PrepareJob.objects.filter(
        signature=signature, status__in=(PrepareStatus.SUCCEEDED, PrepareStatus.FAILED)
    )
    stale = list(finished.order_by("-finished_at", "-job_id").values_list("job_id", flat=True)[keep:])
    if stale:
        PrepareJob.objects.filter(job_id__in=stale).delete()
    return stale


def prepare_jobs_reconcile() -> dict:
    """End the prepare jobs whose queue job ended, or was deleted, without ending them (its
    last worker died, or an operator canceled or deleted it in the jobs admin): failed."""
    going = unfinished_job_ids()
    stuck = PrepareJob.objects.exclude(status__in=(PrepareStatus.SUCCEEDED, PrepareStatus.FAILED)).exclude(
        queue_job_id__in=going
    )
    ended = 0
    for job_id in stuck.values_list("job_id", flat=True):
        ended += job_finish(job_id=job_id, error=error_of("internal_error", "its queue job ended without finishing it"))
    return {"ended": ended}
