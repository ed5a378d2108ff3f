"""State changes of ingestion runs (seed 004, sections 4 and 9): their lifecycle on the job
queue, and the jobs a run enqueues.

Start creates a run and enqueues ``discover`` with its run_id; each step (``ingestion.steps``)
records its items and enqueues the next step's jobs through :func:`step_job_enqueue`, with the
same run_id and an idempotency key and args that are functions of the run and the item alone, so
a retried step enqueues nothing twice and never conflicts with itself. A periodic task ends each
run whose jobs are all finished: completed, or failed when items failed (section 4.3). Cancel
ends the run, its items and its jobs in one transaction; nothing is enqueued for it afterwards.

Every write of a run is an UPDATE of its row; the row's trigger sets ``updated_at = now()``
(and stamps ``stats_json.updated_at`` when the stats change), whoever writes. A run that was
canceled takes no more jobs and no more live items: writers lock the run row first, so a
cancel either waits for them or is seen by them.
"""

import uuid

from django.conf import settings
from django.db import transaction
from django.db.models.functions import Now

from ingestion import selectors
from ingestion.models import ENDED_RUN_STATUSES, IngestionItem, IngestionRun, ItemStatus, RunStage, RunStatus, Source
from jobs.queue.selectors import jobs_with_args
from jobs.queue.services import Enqueued, JobSpec, Selection, job_enqueue_many, jobs_cancel, jobs_retry
from jobs.queue.states import LIVE
from pipeline_project.api.errors import ConflictError, InvalidInputError, NotFoundError
from pipeline_project.db import sql
from pipeline_project.db.storable import json_problem

# What a run's status may become (section 4.3); a failed run runs again when its failed items are retried.
RUN_TRANSITIONS = {
    RunStatus.PENDING: {RunStatus.RUNNING, RunStatus.FAILED, RunStatus.CANCELED},
    RunStatus.RUNNING: {RunStatus.RUNNING, RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELED},
    RunStatus.FAILED: {RunStatus.RUNNING},
    RunStatus.COMPLETED: set(),
    RunStatus.CANCELED: set(),
}
STAGE_OF_TASK = {"discover": RunStage.DISCOVERY, "download": RunStage.DOCUMENTS, "ocr": RunStage.OCR}
MAX_ERROR_MESSAGE_CHARS = 1000
LIVE_ITEM_STATUSES = (ItemStatus.PENDING, ItemStatus.RUNNING)
LIVE_JOB_STATUSES = LIVE  # queued, running


class RunCanceled(ConflictError):
    """The run was canceled: nothing more is written to it or enqueued for it."""

    code = "run_canceled"

    def __init__(self, run_id):
        super().__init__(f"run {run_id} was canceled: nothing more is written to it", details={"run_id": str(run_id)})


def _source(source_id: int) -> Source:
    source = Source.objects.filter(id=source_id).first()
    if source is None:
        raise NotFoundError(f"source {source_id} not found", code="source_not_found")
    return source


def run_create(*, source_id: int, manual: bool = False) -> IngestionRun:
    """A pending run of the source, for an external worker to drive (nothing is enqueued)."""
    return IngestionRun.objects.create(source=_source(source_id), manual=manual)


def run_start(*, source_id: int, manual: bool = True) -> IngestionRun:
    """Run: a pending run of the (enabled) source, with its ``discover`` job queued."""
    source = _source(source_id)
    if not source.enabled:
        raise ConflictError(f"source {source.name} is disabled", code="source_disabled")
    with transaction.atomic():
        run = IngestionRun.objects.create(source=source, manual=manual)
        step_job_enqueue(
            run_id=str(run.id),
            source_id=source.id,
            task="discover",
            item_key=f"source:{source.id}",
            args={"manual": manual},
            scope=str(run.id),
        )
    return run


def _locked(run_id) -> IngestionRun:
    run = IngestionRun.objects.select_for_update(no_key=True).filter(id=run_id).first()
    if run is None:
        raise NotFoundError(f"run {run_id} not found", code="run_not_found")
    return run


def _write(run: IngestionRun, changes: dict) -> IngestionRun:
    """The one way a service writes a run (its trigger moves updated_at); the run as written."""
    IngestionRun.objects.filter(id=run.id).update(**(changes or {"updated_at": Now()}))
    run.refresh_from_db()
    return run


def run_update(
    *,
    run_id: uuid.UUID,
    status: str | None = None,
    active_stage: str | None = None,
    error_message: str | None = None,
    stats_json: dict | None = None,
    finished_at=None,
) -> IngestionRun:
    """The seed's run-level update (section 9), within the lifecycle of section 4.3: a run that
    starts running gets ``started_at``; one that ends gets ``finished_at`` (now, unless given)
    and, on completion, ``active_stage = summary``."""
    if stats_json is not None and (why := json_problem(stats_json)):
        raise InvalidInputError(f"stats_json cannot be stored: it {why}")
    with transaction.atomic():
        run = _locked(run_id)
        changes = {}
        if status is not None:
            if status not in RUN_TRANSITIONS.get(run.status, ()):
                raise ConflictError(f"a {run.status} run cannot become {status}", code="invalid_transition")
            changes.update(_status_changes(run, status))
        if active_stage is not None:
            changes["active_stage"] = active_stage
        if error_message is not None:
            changes["error_message"] = error_message[:MAX_ERROR_MESSAGE_CHARS]
        if stats_json is not None:
            changes["stats_json"] = stats_json
        if finished_at is not None:
            changes["finished_at"] = finished_at
        return _write(run, changes)


def _status_changes(run: IngestionRun, status: str) -> dict:
    changes: dict = {"status": status}
    if status == RunStatus.RUNNING:
        changes.update(started_at=run.started_at or Now(), finished_at=None)
    if status in ENDED_RUN_STATUSES:
        changes["finished_at"] = Now()
    if status == RunStatus.COMPLETED:
        changes["active_stage"] = RunStage.SUMMARY
    return changes


def run_cancel(*, run_id: uuid.UUID, by: str) -> IngestionRun:
    """End the run ``canceled`` with its pending and running items, cancel its queued jobs and
    ask its running ones to stop (they hear it at once), all in one transaction."""
    with transaction.atomic():
        run = run_update(run_id=run_id, status=RunStatus.CANCELED)
        IngestionItem.objects.filter(run_id=run_id, status__in=LIVE_ITEM_STATUSES).update(
            status=ItemStatus.CANCELED, ingest_status=ItemStatus.CANCELED
        )
        live_jobs = jobs_with_args(values={"run_id": str(run_id)}, statuses=LIVE_JOB_STATUSES)
        jobs_cancel(selection=Selection.of_queryset(live_jobs), by=by)
    return run


def run_retry_failed(*, run_id: uuid.UUID, by: str) -> int:
    """Put the jobs of the run's failed items back in the queue; the run runs again."""
    with transaction.atomic():
        run = _locked(run_id)
        if run.status == RunStatus.CANCELED:
            raise RunCanceled(run_id)
        job_ids = set(IngestionItem.objects.filter(run=run, status="failed").values_list("job_id", flat=True)) - {None}
        if not job_ids:
            return 0
        if run.status in ENDED_RUN_STATUSES:
            run_update(run_id=run_id, status=RunStatus.RUNNING, error_message="")
        return jobs_retry(selection=Selection.of_ids(sorted(job_ids)), by=by).changed


def runs_settle() -> dict:
    """End every pending or running run whose jobs have all finished: failed when some items
    failed (its message names the first) or a job failed, else completed with active stage
    ``summary``. A pending run whose jobs all ended without one of its steps running fails (it
    cannot complete)."""
    settled = 0
    for run in selectors.runs_to_settle():
        try:
            run_update(run_id=run.id, **_settled(run))
        except (ConflictError, NotFoundError):
            continue  # canceled, retried or deleted since the read: nothing to settle
        settled += 1
    return {"ended": settled}


def _settled(run: IngestionRun) -> dict:
    """How a run whose jobs have all finished ends (``run`` as ``selectors.runs_to_settle`` reads it)."""
    if run.failed_items:
        return {"status": RunStatus.FAILED, "error_message": f"{run.failed_items} item(s) failed ({run.first_failure})"}
    if run.failed_job:  # the stage that could not go on
        return {"status": RunStatus.FAILED, "error_message": run.failed_job}
    if run.status == RunStatus.PENDING:  # its jobs ended with no step of the run claimed: nothing ran
        return {"status": RunStatus.FAILED, "error_message": "the run's jobs ended before any of its steps ran"}
    return {"status": RunStatus.COMPLETED}


def step_job_enqueue(*, run_id: str | None, source_id: int, task: str, item_key: str, args: dict, scope: str) -> None:
    """Enqueue the job of a step (``task``) for an item (refused once the run was canceled).
    ``scope`` is the run, or for a job of no run (compatible mode) the job that enqueues it."""
    run_jobs_enqueue(
        run_id=run_id,
        specs=[
            JobSpec(
                queue=settings.INGESTION_QUEUE,
                task=task,
                lock_key=f"ingestion:{scope}:{item_key}",
                idempotency_key=f"ingestion:{scope}:{task}:{item_key}",
                args={"run_id": run_id, "source_id": source_id, **args},
            )
        ],
    )


def run_jobs_enqueue(*, run_id: str | None, specs: list[JobSpec]) -> list[Enqueued]:
    """Enqueue jobs of a run; refused (RunCanceled) once it was canceled. The run row is locked to
    the commit: a cancel either waits and then cancels these jobs too, or came first and is seen.
    A job of no run (an older producer's, compatible mode) is enqueued as it is."""
    with transaction.atomic():
        if run_id is not None and _locked(run_id).status == RunStatus.CANCELED:
            raise RunCanceled(run_id)
        return job_enqueue_many(specs=specs)


def run_job_claimed(*, run_id: uuid.UUID, task: str) -> None:
    """A job of the run was claimed: a pending run starts running, and its active stage moves on
    to the job's (discover → discovery, download → documents, ocr → ocr), never back. A
    canceled run raises RunCanceled; an ended one is left as it is."""
    stage = STAGE_OF_TASK[task]
    order = list(STAGE_OF_TASK.values())
    status = sql.rows(
        """
        WITH run AS (SELECT id, status FROM ingestion_runs WHERE id = %(run)s),
        moved AS (
            UPDATE ingestion_runs SET
                status = 'running',
                started_at = coalesce(started_at, now()),
                active_stage = CASE WHEN array_position(%(order)s::text[], active_stage) >= %(rank)s
                                    THEN active_stage ELSE %(stage)s END
            WHERE id = %(run)s AND status IN ('pending', 'running')
            RETURNING status
        )
        SELECT coalesce((SELECT status FROM moved), (SELECT status FROM run))
        """,
        {"order": [str(s) for s in order], "rank": order.index(stage) + 1, "stage": str(stage), "run": str(run_id)},
    )[0][0]
    if status == RunStatus.CANCELED:
        raise RunCanceled(run_id)
