import os
import signal
import subprocess
import sys
import uuid
from contextlib import contextmanager
from pathlib import Path

from django.db import connections

from ingestion import services
from ingestion.models import IngestionItem, IngestionRun, Source
from jobs.queue.models import Worker
from jobs.runtime.config import WorkerConfig
from tests.db_helpers import subprocess_database_env
from tests.helpers import wait_for
from tests.jobs.helpers import FAST

ROOT = Path(__file__).resolve().parents[2]


def new_run(name: str = "gov") -> IngestionRun:
    source, _created = Source.objects.get_or_create(name=name, defaults={"start_url": "http://127.0.0.1/"})
    return services.run_create(source_id=source.id)


def item(run: IngestionRun, **fields) -> dict:
    """A discovery item of ``run`` (status completed), with ``fields`` over it."""
    return {
        "run_id": str(run.id),
        "source_id": run.source_id,
        "stage": "discovery",
        "item_type": "source_url",
        "status": "completed",
        "source_url_id": "1",
        **fields,
    }


def source_of(site, path: str = "/index.html", **fields) -> Source:
    """A source starting at ``path`` of the test site; no crawl delay unless asked for."""
    fields = {"crawl_delay_sec": 0, "max_concurrent_per_host": 4, **fields}
    return Source.objects.create(name=f"site-{uuid.uuid4().hex[:8]}", start_url=site.url(path), **fields)


def ended(run, timeout: float = 60) -> IngestionRun:
    wait_for(
        lambda: IngestionRun.objects.get(id=run.id).status in ("completed", "failed", "canceled"),
        timeout=timeout,
        what="the run to end",
    )
    return IngestionRun.objects.get(id=run.id)


def statuses(run, stage) -> dict[str, str]:
    """``{last path segment of the URL: status}`` of the run's items of ``stage``."""
    return {
        item.document_url.rsplit("/", 1)[-1]: item.status for item in IngestionItem.objects.filter(run=run, stage=stage)
    }


def worker_config(concurrency: int = 4) -> WorkerConfig:
    """An in-process worker serving the default queue (the ingestion queue in tests)."""
    return WorkerConfig.from_settings({"queue": {"default": concurrency}}, **FAST)


@contextmanager
def runworker_process(*queues: str, storage: Path):
    """A ``manage.py runworker`` process serving ``queues`` (e.g. "default:4") against the test
    databases, registered before this yields; stopped (SIGTERM, then SIGKILL) on exit."""
    env = {
        **os.environ,
        **subprocess_database_env(),
        "INGESTION_STORAGE_DIR": str(storage),
        "INGESTION_SETTLE_PERIOD_SEC": "0.2",
        "DL_HEARTBEAT_SEC": "0.2",
        "PYTHONUNBUFFERED": "1",
    }
    arguments = [argument for queue in queues for argument in ("--queue", queue)]
    process = subprocess.Popen(
        [sys.executable, "manage.py", "runworker", *arguments],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(
            lambda: process.poll() is not None or Worker.objects.filter(pid=process.pid).exists(),
            timeout=60,
            what="the runworker process to start",
        )
        assert process.poll() is None, "runworker exited"
        yield process
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def planted_run(*, items: int, jobs: int = 0, failed_jobs: int = 0) -> IngestionRun:
    """A completed run with ``items`` items over its three stages (every 50th failed, every
    21st skipped at OCR with its reason) and ``jobs`` succeeded and ``failed_jobs`` failed jobs,
    each kind inserted in one statement, the tables analyzed as a year's would be."""
    run = new_run("at size")
    IngestionRun.objects.filter(id=run.id).update(status="completed")
    with connections["default"].cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO ingestion_items (run_id, source_id, item_key, item_label, stage, item_type, status,
                                         error_message, ingest_reason, document_url)
            SELECT %(run)s, %(source)s, 'item-' || i, 'Letter ' || i, kind.stage, kind.type, kind.status,
                   CASE WHEN kind.status = 'failed' THEN 'HTTP 404' END,
                   CASE WHEN kind.status = 'skipped' THEN 'OCR is not installed on this worker' END,
                   'https://city.example/letters/' || i || '.pdf'
            FROM generate_series(1, %(items)s) AS i, LATERAL (
                SELECT (ARRAY['discovery', 'documents', 'ocr'])[1 + i %% 3] AS stage,
                       (ARRAY['source_url', 'document', 'ocr_job'])[1 + i %% 3] AS type,
                       CASE WHEN i %% 50 = 0 THEN 'failed' WHEN i %% 21 = 2 THEN 'skipped' ELSE 'completed' END AS status
            ) AS kind
            """,
            {"run": run.id, "source": run.source_id, "items": items},
        )
        cursor.execute(
            """
            INSERT INTO dl_jobs (job_id, queue, task, args, lock_key, status, attempt, error, created_at,
                                 available_at, started_at, finished_at)
            SELECT gen_random_uuid(), 'default', 'ocr', jsonb_build_object('run_id', %(run)s::text), 'at-size-' || i,
                   s::dl_status, 1, CASE WHEN s = 'failed' THEN 'HTTP 404' END, now(), now(), now(), now()
            FROM generate_series(1, %(jobs)s + %(failed)s) AS i,
                 LATERAL (SELECT CASE WHEN i <= %(failed)s THEN 'failed' ELSE 'succeeded' END AS s) AS st
            """,
            {"run": str(run.id), "jobs": jobs, "failed": failed_jobs},
        )
        cursor.execute("ANALYZE ingestion_items, dl_jobs")
    return IngestionRun.objects.get(id=run.id)
