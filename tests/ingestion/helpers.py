import os
import signal
import subprocess
import sys
import uuid
from contextlib import contextmanager
from pathlib import Path

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
