"""Cancel stops the pipeline's running jobs at once, with a real worker: a download streaming from a
slow server is cut off, a running Tesseract is killed; their items stay canceled and nothing is
enqueued for the run afterwards."""

import os
import shutil
import time
from pathlib import Path

import pytest

from ingestion import services
from ingestion.models import IngestionItem, IngestionRun
from jobs.queue.models import Job
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.helpers import wait_for
from tests.ingestion import site as website
from tests.ingestion.helpers import source_of

pytestmark = ALL_DATABASES_COMMITTED


def running_item(run, stage: str) -> IngestionItem:
    return wait_for(
        lambda: IngestionItem.objects.filter(run=run, stage=stage, status="running").first(),
        timeout=60,
        what=f"a running {stage} item",
    )


def canceled_within(run, task: str) -> float:
    """Cancel the run; how long until its running ``task`` job ended (canceled)."""
    job = Job.objects.get(task=task, args__run_id=str(run.id))
    assert job.status == "running"
    started = time.monotonic()
    services.run_cancel(run_id=run.id, by="operator")
    wait_for(lambda: Job.objects.get(job_id=job.job_id).status != "running", timeout=30, what="the job to stop")
    elapsed = time.monotonic() - started
    assert Job.objects.get(job_id=job.job_id).status == "canceled"
    return elapsed


def nothing_moved_after_cancel(run) -> None:
    time.sleep(1.5)  # what a late writer would have done by now
    assert IngestionRun.objects.get(id=run.id).status == "canceled"
    tasks = set(Job.objects.filter(args__run_id=str(run.id)).values_list("task", "status"))
    assert all(status in ("succeeded", "canceled") for _task, status in tasks), tasks
    assert not any(status in ("pending", "running") for status in statuses_of(run).values())


def statuses_of(run) -> dict[tuple[str, str], str]:
    return {
        (item.stage, item.document_url.rsplit("/", 1)[-1]): item.status
        for item in IngestionItem.objects.filter(run=run)
    }


@pytest.mark.parametrize(
    "pause",
    [0.2, 30],  # a server that trickles (~25 s for the file), one that stalls after its first bytes
)
def test_cancel_cuts_off_a_download_streaming_from_a_slow_server(site, worker, pipeline_settings, pause):
    site.files["/index.html"] = ("text/html", b'<a href="/docs/big.pdf">A large scan</a>')
    site.files["/docs/big.pdf"] = ("application/pdf", website.pdf("big") + b"%" * 2_000_000)
    site.trickle["/docs/big.pdf"] = (16_384, pause)
    run = services.run_start(source_id=source_of(site).id)
    running_item(run, "documents")
    wait_for(lambda: site.requested("/docs/big.pdf"), what="the download to start")
    time.sleep(0.5)  # well into the body

    elapsed = canceled_within(run, "download")

    assert elapsed < 1.0, f"the download stopped {elapsed:.2f} s after the cancel"
    if pause < 1:  # a stalled server would notice only at its next write
        request = wait_for(lambda: (found := site.requested("/docs/big.pdf")[0]).ended and found, what="the cut-off")
        assert request.cut_off  # the server saw its client leave
    nothing_moved_after_cancel(run)
    assert statuses_of(run) == {
        ("discovery", "index.html"): "completed",
        ("discovery", "big.pdf"): "completed",
        ("documents", "big.pdf"): "canceled",
    }
    assert not Job.objects.filter(task="ocr").exists()
    assert not [path for path in Path(pipeline_settings.INGESTION_STORAGE_DIR).rglob("*") if path.is_file()]


def tesseract_children() -> list[int]:
    """Tesseract processes started by this test process (the worker runs in a thread of it)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            name = stat.read_text().split("(", 1)[1].rsplit(")", 1)[0]
        except OSError:
            continue
        if name == "tesseract" and int(fields[1]) == os.getpid():
            found.append(int(stat.parent.name))
    return found


@pytest.mark.skipif(not shutil.which("tesseract"), reason="needs tesseract-ocr")
def test_cancel_kills_a_running_ocr(site, worker):
    lines = tuple(f"Line {n} of the long scanned register of the city archive, page one" for n in range(60))
    site.files["/index.html"] = ("text/html", b'<a href="/docs/register.png">The register</a>')
    site.files["/docs/register.png"] = ("image/png", website.png_of_text(*lines, width=2400, size=30))  # ~20 s of OCR
    run = services.run_start(source_id=source_of(site).id)
    running_item(run, "ocr")
    [tesseract] = wait_for(tesseract_children, what="Tesseract to start")

    elapsed = canceled_within(run, "ocr")

    assert elapsed < 1.0, f"the OCR stopped {elapsed:.2f} s after the cancel"
    assert not Path(f"/proc/{tesseract}").exists() or "(tesseract)" not in Path(f"/proc/{tesseract}/stat").read_text()
    nothing_moved_after_cancel(run)
    assert statuses_of(run)[("ocr", "register.png")] == "canceled"
    assert statuses_of(run)[("documents", "register.png")] == "completed"
