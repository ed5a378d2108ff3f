"""The discover → download → ocr pipeline of a source, on the job queue (seed 004).

Run creates a run and enqueues ``discover`` with its run_id; each step records its items and
enqueues the next step's jobs with the same run_id and an idempotency key derived from the run
and the item, so a retried step never enqueues twice. A periodic task ends each run whose jobs
are all finished: completed, or failed when items failed (section 4.3). Jobs without a run_id
(older producers) run in compatible mode: the work is done, no items are written.
"""

import hashlib
import logging
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction

from ingestion import extraction, fetching, keys, services
from ingestion.models import ENDED_RUN_STATUSES, ITEM_TYPE_OF_STAGE, IngestionItem, IngestionRun, RunStatus, Source
from jobs.services import JobSpec, Selection, job_enqueue_many, jobs_cancel, jobs_retry
from jobs.services._db import _rows
from pipeline_project.core.errors import ConflictError, NotFoundError

log = logging.getLogger("ingestion")


class StepFailed(Exception):
    """The step cannot succeed for this item (recorded on the item); its job fails without retries."""


@dataclass(frozen=True)
class Step:
    """What a job of the pipeline is about: its run (None in compatible mode) and source."""

    run_id: str | None
    source: Source
    job_id: uuid.UUID

    def failed(self, item: dict, message: str) -> StepFailed:
        """Record ``item`` as failed with ``message``; the error to raise."""
        self.items({**item, "status": "failed", "error_message": message, "last_error_message": message})
        return StepFailed(message)

    def items(self, *items: dict) -> None:
        if self.run_id is not None:
            services.items_upsert(
                items=[
                    {"run_id": self.run_id, "source_id": self.source.id, "job_id": str(self.job_id), **i} for i in items
                ]
            )


def step_of(args: dict, task: str, job_id: uuid.UUID) -> Step:
    """The job's step; a pending run starts running. Args that name no source, or a run that
    does not exist or was canceled, leave nothing to do."""
    source_id, run_id = args.get("source_id"), args.get("run_id")
    source = Source.objects.filter(id=source_id).first() if isinstance(source_id, int) else None
    if source is None:
        raise StepFailed(f"source {source_id!r} not found")
    if run_id is None:
        log.warning("a job without run_id: compatible mode, no items written", extra={"task": task})
        return Step(None, source, job_id)
    try:
        run = IngestionRun.objects.filter(id=uuid.UUID(str(run_id)), source=source).first()
    except ValueError:
        run = None
    if run is None:
        raise StepFailed(f"run {run_id!r} of source {source.id} not found")
    if run.status == RunStatus.CANCELED:
        raise StepFailed("the run was canceled")
    services.run_job_claimed(run_id=run.id, task=task)
    return Step(str(run.id), source, job_id)


def _enqueue(step: Step, task: str, item_key: str, args: dict) -> None:
    scope = step.run_id or f"job-{step.job_id}"
    job_enqueue_many(
        specs=[
            JobSpec(
                queue=settings.INGESTION_QUEUE,
                task=task,
                lock_key=f"ingestion:{scope}:{item_key}",
                idempotency_key=f"ingestion:{scope}:{task}:{item_key}",
                args={"run_id": step.run_id, "source_id": step.source.id, **args},
            )
        ]
    )


# --- runs --------------------------------------------------------------------------------


def run_start(*, source_id: int, manual: bool = True) -> IngestionRun:
    """Run: a pending run of the source, with its ``discover`` job queued."""
    source = Source.objects.filter(id=source_id).first()
    if source is None:
        raise NotFoundError(f"source {source_id} not found", code="source_not_found")
    if not source.enabled:
        raise ConflictError(f"source {source.name} is disabled", code="source_disabled")
    with transaction.atomic():
        run = services.run_create(source_id=source.id, manual=manual)
        step = Step(str(run.id), source, uuid.uuid4())
        _enqueue(step, "discover", f"source:{source.id}", {"manual": manual})
    return run


def _run_jobs(run_id, statuses: tuple[str, ...]) -> Selection:
    return Selection(
        "SELECT job_id FROM dl_jobs WHERE args ? 'run_id' AND args ->> 'run_id' = %s AND status = ANY (%s)",
        (str(run_id), list(statuses)),
    )


def run_cancel(*, run_id: uuid.UUID, by: str) -> IngestionRun:
    """Cancel the run's queued jobs, ask its running ones to stop, and end it ``canceled``."""
    with transaction.atomic():
        run = services.run_update(run_id=run_id, status=RunStatus.CANCELED)
        IngestionItem.objects.filter(run_id=run_id, status__in=("pending", "running")).update(
            status="canceled", ingest_status="canceled"
        )
    jobs_cancel(selection=_run_jobs(run_id, ("queued", "running")), by=by)
    return run


def run_retry_failed(*, run_id: uuid.UUID, by: str) -> int:
    """Put the jobs of the run's failed items back in the queue; the run runs again."""
    with transaction.atomic():
        run = IngestionRun.objects.select_for_update().filter(id=run_id).first()
        if run is None:
            raise NotFoundError(f"run {run_id} not found", code="run_not_found")
        job_ids = set(IngestionItem.objects.filter(run=run, status="failed").values_list("job_id", flat=True)) - {None}
        if not job_ids:
            return 0
        if run.status in ENDED_RUN_STATUSES:
            services.run_update(run_id=run_id, status=RunStatus.RUNNING, error_message="")
        return jobs_retry(selection=Selection.of_ids(sorted(job_ids)), by=by).changed


def runs_settle() -> dict:
    """End every running run whose jobs have all finished: failed when some items failed (or
    a job failed), else completed with active stage ``summary``."""
    ended = _rows(
        """
        SELECT r.id,
               (SELECT count(*) FROM ingestion_items i WHERE i.run_id = r.id AND i.status = 'failed'),
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
    for run_id, failed_items, failed_job in ended:
        if failed_items or failed_job:
            message = f"{failed_items} item(s) failed" if failed_items else failed_job  # the stage that could not go on
            services.run_update(run_id=run_id, status=RunStatus.FAILED, error_message=message)
        else:
            services.run_update(run_id=run_id, status=RunStatus.COMPLETED)
    return {"ended": len(ended)}


# --- steps -------------------------------------------------------------------------------


def _item(stage: str, url: str, label: str | None, **fields) -> dict:
    """An item of ``stage`` keyed by its URL (section 5.4's fallbacks: the pipeline has no ids)."""
    item_type = str(ITEM_TYPE_OF_STAGE[stage])
    key = keys.item_key(item_type=item_type, url=url)
    return {
        "item_key": key,
        "stage": stage,
        "item_type": item_type,
        "document_url": url,
        "item_label": label or None,
        **fields,
    }


def _is_document(url: str) -> bool:
    return urlsplit(url).path.lower().endswith(settings.INGESTION_DOCUMENT_EXTENSIONS)


def discover(*, step: Step) -> dict:
    """Fetch the start page; record each linked document and enqueue its download."""
    source = step.source
    hosts = fetching.allowed_hosts(source.start_url, source.allowed_hosts)
    try:
        page_url, html = fetching.fetch_text(source.start_url, hosts=hosts, max_bytes=source.max_bytes)
    except fetching.FetchError as exc:
        raise StepFailed(f"discovery: {exc}") from None
    documents = [(url, label) for url, label in fetching.links_of(html, page_url) if _is_document(url)]
    documents = [(url, label) for url, label in documents if urlsplit(url).hostname in hosts][: source.max_documents]
    with transaction.atomic():
        for url, label in documents:
            item = _item("discovery", url, label, status="completed")
            step.items(item)
            _enqueue(step, "download", item["item_key"], {"url": url, "label": label})
    return {"documents": len(documents)}


def _storage_path(step: Step, url: str) -> Path:
    suffix = Path(urlsplit(url).path).suffix.lower()[:10]
    name = hashlib.sha256(url.encode()).hexdigest()[:24] + suffix
    return Path(settings.INGESTION_STORAGE_DIR) / (step.run_id or "no-run") / name


def download(*, step: Step, url: str, label: str | None = None) -> dict:
    """Fetch a document into storage; record its file; enqueue its OCR."""
    base = _item("documents", url, label)
    step.items({**base, "status": "running"})
    hosts = fetching.allowed_hosts(step.source.start_url, step.source.allowed_hosts)
    path = _storage_path(step, url)
    try:
        fetched = fetching.fetch_to(url, path, hosts=hosts, max_bytes=step.source.max_bytes)
    except fetching.FetchError as exc:
        raise step.failed(base, str(exc)) from None
    kind = extraction.file_kind(path)
    with transaction.atomic():
        step.items(
            {
                **base,
                "status": "completed",
                "filename": path.name,
                "file_checksum": fetched.sha256,
                "file_kind": kind,
                "payload_json": {"bytes": fetched.size, "content_type": fetched.content_type},
            }
        )
        _enqueue(step, "ocr", base["item_key"], {"url": url, "path": str(path), "label": label})
    return {"bytes": fetched.size, "sha256": fetched.sha256, "kind": kind}


def ocr(*, step: Step, url: str, path: str, run, label: str | None = None) -> dict:
    """Extract the document's text; the quality gate decides completed or review_required."""
    file = Path(path)
    base = _item("ocr", url, label, filename=file.name)
    step.items({**base, "status": "running"})
    try:
        text, method = extraction.extract_text(file, extraction.file_kind(file), run=run)
    except extraction.OcrUnavailable as exc:
        step.items({**base, "status": "skipped", "ingest_reason": str(exc), "review_reason": str(exc)})
        return {"skipped": str(exc)}
    except (extraction.ExtractionError, OSError, subprocess.TimeoutExpired) as exc:
        raise step.failed(base, str(exc)[:500]) from None
    file.with_suffix(file.suffix + ".txt").write_text(text)
    reason = extraction.review_reason(text)
    status = "review_required" if reason else "completed"
    step.items(
        {
            **base,
            "status": status,
            "needs_review": bool(reason),
            "review_reason": reason,
            "payload_json": {"method": method, "characters": len(text), "excerpt": text.strip()[:300]},
        }
    )
    return {"status": status, "method": method, "characters": len(text)}
