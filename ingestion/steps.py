"""The pipeline's steps, one per job: discover (a source's start page → its documents), download
(a document → a file) and ocr (a file → its text). Each records its items (sections 6.1–6.3)
and enqueues the next step's jobs. A step stops as soon as its job does (``stop``: canceled, or
its lease lost): fetches and subprocesses are cut off, and a write to a canceled run raises
``RunCanceled`` before anything is written or enqueued. Jobs without a run_id (older
producers) run in compatible mode: the work is done, no items are written.
"""

import hashlib
import logging
import subprocess
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction

from ingestion import extraction, fetching, keys, links, services
from ingestion.models import ITEM_TYPE_OF_STAGE, IngestionItem, IngestionRun, ItemStage, Source
from ingestion.stopping import NEVER, Stopped
from pipeline_project.api.errors import ConflictError

log = logging.getLogger("ingestion")


class StepFailed(Exception):
    """The step cannot succeed for this item (recorded on the item); its job fails without retries."""


@dataclass(frozen=True)
class Step:
    """What a job of the pipeline is about: its run (None in compatible mode) and source, and
    how it is stopped."""

    run_id: str | None
    source: Source
    job_id: uuid.UUID
    stop: threading.Event = NEVER  # the job's stop signal
    run: extraction.Runner = field(default=subprocess.run)  # runs a subprocess, killed when the job stops

    def items(self, *items: dict) -> None:
        if self.run_id is not None:
            services.items_upsert(
                items=[
                    {"run_id": self.run_id, "source_id": self.source.id, "job_id": str(self.job_id), **i} for i in items
                ]
            )

    def failed(self, item: dict, message: str) -> StepFailed:
        """Record ``item`` as failed with ``message``; the error to raise."""
        self.items({**item, "status": "failed", "error_message": message, "last_error_message": message})
        return StepFailed(message)

    def enqueue(self, task: str, item_key: str, args: dict) -> None:
        services.step_job_enqueue(
            run_id=self.run_id,
            source_id=self.source.id,
            task=task,
            item_key=item_key,
            args=args,
            scope=self.run_id or f"job-{self.job_id}",
        )

    def fetcher(self) -> fetching.Fetcher:
        return fetching.Fetcher(fetching.Rules.of(self.source), stop=self.stop)

    def label(self, url: str) -> str | None:
        """The label discovery found for the document at ``url``."""
        if self.run_id is None:
            return None
        key = keys.item_key(item_type=ITEM_TYPE_OF_STAGE[ItemStage.DISCOVERY], url=url)
        labels = IngestionItem.objects.filter(run_id=self.run_id, item_key=key).values_list("item_label", flat=True)
        return labels.first()


def step_of(args: dict, task: str, job_id: uuid.UUID, **how) -> Step:
    """The job's step (``how``: its ``stop`` and ``run``); a pending run starts running. Args that
    name no source or run leave nothing to do; a canceled run raises RunCanceled."""
    source_id, run_id = args.get("source_id"), args.get("run_id")
    source = Source.objects.filter(id=source_id).first() if isinstance(source_id, int) else None
    if source is None:
        raise StepFailed(f"source {source_id!r} not found")
    if run_id is None:
        log.warning("a job without run_id: compatible mode, no items written", extra={"task": task})
        return Step(None, source, job_id, **how)
    try:
        run = IngestionRun.objects.filter(id=uuid.UUID(str(run_id)), source=source).first()
    except ValueError:
        run = None
    if run is None:
        raise StepFailed(f"run {run_id!r} of source {source.id} not found")
    services.run_job_claimed(run_id=run.id, task=task)
    return Step(str(run.id), source, job_id, **how)


def _item(stage: str, url: str, label: str | None, **fields) -> dict:
    """An item of ``stage`` keyed by its URL (section 5.4's fallbacks: the pipeline has no ids)."""
    item_type = str(ITEM_TYPE_OF_STAGE[stage])
    return {
        "item_key": keys.item_key(item_type=item_type, url=url),
        "stage": stage,
        "item_type": item_type,
        "document_url": url,
        "item_label": label or None,
        **fields,
    }


def _is_document(url: str) -> bool:
    return urlsplit(url).path.lower().endswith(settings.INGESTION_DOCUMENT_EXTENSIONS)


def discover(*, step: Step) -> dict:
    """Fetch the start page (recorded as a discovery item, failed if it cannot be read); record
    each document it links, once per normalized URL, and enqueue its download. A document whose
    job cannot be enqueued fails alone; the others go on."""
    source = step.source
    start = _item("discovery", source.start_url, "Start page")
    try:
        with step.fetcher() as fetcher:
            page_url, html = fetcher.page(source.start_url)
    except fetching.FetchError as exc:
        raise step.failed(start, str(exc)) from None
    found = links.page_links(html, page_url)
    hosts = fetching.allowed_hosts(source.start_url, source.allowed_hosts)
    documents = [link for link in found if _is_document(link.url) and urlsplit(link.url).hostname in hosts]
    documents = documents[: source.max_documents]
    step.items({**start, "status": "completed", "payload_json": {"links": len(found), "documents": len(documents)}})
    for link in documents:
        if step.stop.is_set():
            raise Stopped("stopped during discovery")
        _discovered(step, link)
    return {"links": len(found), "documents": len(documents)}


def _discovered(step: Step, link: links.Link) -> None:
    item = _item("discovery", link.url, link.label, status="completed")
    try:
        with transaction.atomic():
            step.items(item)
            step.enqueue("download", item["item_key"], {"url": link.url})
    except services.RunCanceled:
        raise
    except ConflictError as exc:  # its key names another job (an older producer's): this item fails alone
        step.failed(item, exc.message)


def _storage_path(step: Step, url: str) -> Path:
    suffix = Path(urlsplit(url).path).suffix.lower()[:10]
    name = hashlib.sha256(url.encode()).hexdigest()[:24] + suffix
    return Path(settings.INGESTION_STORAGE_DIR) / (step.run_id or "no-run") / name


def download(*, step: Step, url: str) -> dict:
    """Fetch a document into storage; record its file; enqueue its OCR."""
    base = _item("documents", url, step.label(url))
    step.items({**base, "status": "running"})
    path = _storage_path(step, url)
    try:
        with step.fetcher() as fetcher:
            fetched = fetcher.download(url, path)
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
        step.enqueue("ocr", base["item_key"], {"url": url, "path": str(path)})
    return {"bytes": fetched.size, "sha256": fetched.sha256, "kind": kind}


def ocr(*, step: Step, url: str, path: str) -> dict:
    """Extract the document's text; the quality gate decides completed or review_required."""
    file = Path(path)
    base = _item("ocr", url, step.label(url), filename=file.name)
    step.items({**base, "status": "running"})
    try:
        text, method = extraction.extract_text(file, extraction.file_kind(file), run=step.run, stop=step.stop)
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
