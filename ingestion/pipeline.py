"""Runs of a source's discover → download → ocr pipeline on the job queue (seed 004).

Run creates a run and enqueues ``discover`` with its run_id; each step (``ingestion.steps``)
records its items and enqueues the next step's jobs through :func:`job_enqueue`, with the same
run_id and an idempotency key and args that are functions of the run and the item alone, so a
retried step enqueues nothing twice and never conflicts with itself. A periodic task ends each
run whose jobs are all finished: completed, or failed when items failed (section 4.3). Cancel
ends the run, its items and its jobs in one transaction; nothing is enqueued for it afterwards.
"""

import uuid

from django.conf import settings
from django.db import transaction

from ingestion import services
from ingestion.models import ENDED_RUN_STATUSES, IngestionItem, IngestionRun, RunStatus, Source
from jobs.services import JobSpec, Selection, jobs_cancel, jobs_retry
from pipeline_project.core import sql
from pipeline_project.core.errors import ConflictError, NotFoundError


def job_enqueue(*, run_id: str | None, source_id: int, task: str, item_key: str, args: dict, scope: str) -> None:
    """Enqueue the job of ``task`` for an item (refused once the run was canceled). ``scope`` is
    the run, or for a job of no run (compatible mode) the job that enqueues it."""
    services.run_jobs_enqueue(
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


def run_start(*, source_id: int, manual: bool = True) -> IngestionRun:
    """Run: a pending run of the source, with its ``discover`` job queued."""
    source = Source.objects.filter(id=source_id).first()
    if source is None:
        raise NotFoundError(f"source {source_id} not found", code="source_not_found")
    if not source.enabled:
        raise ConflictError(f"source {source.name} is disabled", code="source_disabled")
    with transaction.atomic():
        run = services.run_create(source_id=source.id, manual=manual)
        job_enqueue(
            run_id=str(run.id),
            source_id=source.id,
            task="discover",
            item_key=f"source:{source.id}",
            args={"manual": manual},
            scope=str(run.id),
        )
    return run


def _run_jobs(run_id, statuses: tuple[str, ...]) -> Selection:
    return Selection(
        "SELECT job_id FROM dl_jobs WHERE args ? 'run_id' AND args ->> 'run_id' = %s AND status = ANY (%s)",
        (str(run_id), list(statuses)),
    )


def run_cancel(*, run_id: uuid.UUID, by: str) -> IngestionRun:
    """End the run ``canceled`` with its pending and running items, cancel its queued jobs and
    ask its running ones to stop (they hear it at once), all in one transaction."""
    with transaction.atomic():
        run = services.run_cancel(run_id=run_id)
        jobs_cancel(selection=_run_jobs(run_id, ("queued", "running")), by=by)
    return run


def run_retry_failed(*, run_id: uuid.UUID, by: str) -> int:
    """Put the jobs of the run's failed items back in the queue; the run runs again."""
    with transaction.atomic():
        run = IngestionRun.objects.select_for_update(no_key=True).filter(id=run_id).first()
        if run is None:
            raise NotFoundError(f"run {run_id} not found", code="run_not_found")
        if run.status == RunStatus.CANCELED:
            raise services.RunCanceled(run_id)
        job_ids = set(IngestionItem.objects.filter(run=run, status="failed").values_list("job_id", flat=True)) - {None}
        if not job_ids:
            return 0
        if run.status in ENDED_RUN_STATUSES:
            services.run_update(run_id=run_id, status=RunStatus.RUNNING, error_message="")
        return jobs_retry(selection=Selection.of_ids(sorted(job_ids)), by=by).changed


def runs_settle() -> dict:
    """End every running run whose jobs have all finished: failed when some items failed (its
    message names the first) or a job failed, else completed with active stage ``summary``. A
    pending run whose jobs all ended without one of its steps running fails (it cannot complete)."""
    ended = sql.rows(
        """
        SELECT r.id, r.status,
               (SELECT count(*) FROM ingestion_items i WHERE i.run_id = r.id AND i.status = 'failed'),
               (SELECT i.stage || ': ' || coalesce(i.last_error_message, i.error_message, 'failed')
                FROM ingestion_items i WHERE i.run_id = r.id AND i.status = 'failed' ORDER BY i.id LIMIT 1),
               (SELECT j.task || ': ' || coalesce(j.error, j.status::text) FROM dl_jobs j
                WHERE j.args ? 'run_id' AND j.args ->> 'run_id' = r.id::text AND j.status <> 'succeeded'
                ORDER BY j.created_at LIMIT 1)
        FROM ingestion_runs r
        WHERE r.status IN ('pending', 'running')
          AND EXISTS (SELECT 1 FROM dl_jobs j WHERE j.args ? 'run_id' AND j.args ->> 'run_id' = r.id::text)
          AND NOT EXISTS (SELECT 1 FROM dl_jobs j WHERE j.args ? 'run_id' AND j.args ->> 'run_id' = r.id::text
                          AND j.status IN ('queued', 'running'))
        """,
        [],
    )
    settled = 0
    for run_id, status, failed_items, first_failure, failed_job in ended:
        if failed_items:
            outcome = {"status": RunStatus.FAILED, "error_message": f"{failed_items} item(s) failed ({first_failure})"}
        elif failed_job:  # the stage that could not go on
            outcome = {"status": RunStatus.FAILED, "error_message": failed_job}
        elif status == RunStatus.PENDING:  # its jobs ended with no step of the run claimed: nothing ran
            outcome = {"status": RunStatus.FAILED, "error_message": "the run's jobs ended before any of its steps ran"}
        else:
            outcome = {"status": RunStatus.COMPLETED}
        try:
            services.run_update(run_id=run_id, **outcome)
        except (ConflictError, NotFoundError):
            continue  # canceled, retried or deleted since the read: nothing to settle
        settled += 1
    return {"ended": settled}
