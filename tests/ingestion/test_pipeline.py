"""The discover → download → ocr pipeline end to end: a real worker, a local website, real OCR."""

import shutil
import uuid

import pytest

from ingestion import services, steps
from ingestion.models import IngestionItem, IngestionRun
from jobs.queue.models import Job
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.helpers import wait_for
from tests.ingestion import site as website
from tests.ingestion.helpers import ended, source_of, statuses

pytestmark = [
    ALL_DATABASES_COMMITTED,
    pytest.mark.skipif(
        not shutil.which("tesseract") or not shutil.which("pdftoppm"), reason="needs tesseract-ocr and poppler-utils"
    ),
]
DOCUMENTS = ["text.pdf", "scan.png", "missing.pdf", "empty.pdf"]


def step_for(run, task="discover") -> steps.Step:
    return steps.Step(str(run.id), run.source, job_id=Job.objects.get(task=task, args__run_id=str(run.id)).job_id)


def test_a_run_discovers_downloads_and_reads_its_documents_and_a_retry_completes_it(site, worker):
    run = services.run_start(source_id=source_of(site).id)
    failed = ended(run)

    assert failed.status == "failed"
    assert failed.error_message == f"1 item(s) failed (documents: HTTP 404 from {site.url('/docs/missing.pdf')})"
    assert statuses(run, "discovery") == dict.fromkeys(["index.html", *DOCUMENTS], "completed")
    assert statuses(run, "documents") == {
        "text.pdf": "completed",
        "scan.png": "completed",
        "missing.pdf": "failed",
        "empty.pdf": "completed",
    }
    assert statuses(run, "ocr") == {"text.pdf": "completed", "scan.png": "completed", "empty.pdf": "review_required"}
    text = IngestionItem.objects.get(run=run, stage="ocr", document_url__endswith="text.pdf")
    scan = IngestionItem.objects.get(run=run, stage="ocr", document_url__endswith="scan.png")
    empty = IngestionItem.objects.get(run=run, stage="ocr", document_url__endswith="empty.pdf")
    assert text.payload_json["method"] == "text_layer" and "annual report" in text.payload_json["excerpt"]
    assert text.item_label == "Annual report"  # carried from discovery
    assert scan.payload_json["method"] == "ocr" and "council" in scan.payload_json["excerpt"]
    assert (empty.needs_review, empty.review_reason) == (True, "too little text (0 letters)")
    broken = IngestionItem.objects.get(run=run, stage="documents", document_url__endswith="missing.pdf")
    assert broken.error_message.startswith("HTTP 404") and broken.job_id is not None
    assert failed.stats_json["ocr"] == {"total": 3, "completed": 2, "failed": 0, "review_required": 1}
    assert {request.user_agent for request in site.requests} == {"pipeline-control-plane/1 (ingestion)"}

    site.files["/docs/missing.pdf"] = ("application/pdf", website.pdf("A document that came back online today."))
    assert services.run_retry_failed(run_id=run.id, by="test") == 1
    assert IngestionRun.objects.get(id=run.id).status == "running"
    completed = ended(run)

    assert completed.status == "completed" and completed.active_stage == "summary"
    assert statuses(run, "documents")["missing.pdf"] == "completed"
    assert statuses(run, "ocr")["missing.pdf"] == "completed"
    assert IngestionItem.objects.filter(run=run).count() == 5 + 4 + 4  # retries added no rows


def test_a_start_page_that_cannot_be_read_is_a_failed_discovery_item_that_retry_failed_runs_again(site, worker):
    del site.files["/index.html"]
    run = services.run_start(source_id=source_of(site).id)

    failed = ended(run)
    start = IngestionItem.objects.get(run=run, stage="discovery")
    assert (start.item_type, start.status, start.item_label) == ("source_url", "failed", "Start page")
    assert start.document_url == site.url("/index.html")
    assert start.error_message == start.last_error_message == f"HTTP 404 from {site.url('/index.html')}"
    assert failed.status == "failed" and failed.error_message == f"1 item(s) failed (discovery: {start.error_message})"
    assert failed.stats_json["discovery"] == {"total": 1, "completed": 0, "failed": 1}
    assert Job.objects.get(job_id=start.job_id).task == "discover"

    site.files["/index.html"] = website.default_files()["/index.html"]
    assert services.run_retry_failed(run_id=run.id, by="test") == 1
    completed = ended(run)
    assert completed.status == "failed"  # missing.pdf is still missing
    assert statuses(run, "discovery") == dict.fromkeys(["index.html", *DOCUMENTS], "completed")
    assert completed.error_message.startswith("1 item(s) failed (documents: HTTP 404")


def test_a_retried_discover_enqueues_nothing_twice(site):
    run = services.run_start(source_id=source_of(site).id)
    steps.discover(step=step_for(run))
    steps.discover(step=step_for(run))

    assert Job.objects.filter(task="download", args__run_id=str(run.id)).count() == 4
    assert IngestionItem.objects.filter(run=run).count() == 5
    assert len(site.requested("/index.html")) == 2 and len(site.requested("/robots.txt")) == 1  # robots.txt kept


def test_only_allowed_hosts_and_document_links_are_followed(site):
    source = source_of(site, allowed_hosts=["elsewhere.invalid"])
    run = services.run_start(source_id=source.id)

    with pytest.raises(steps.StepFailed, match="not allowed"):
        steps.discover(step=step_for(run))  # the start page's own host is not on the list
    assert site.requests == []


def test_canceling_a_run_cancels_its_jobs_and_items(site):
    run = services.run_start(source_id=source_of(site).id)
    steps.discover(step=step_for(run))
    services.run_cancel(run_id=run.id, by="test")

    assert IngestionRun.objects.get(id=run.id).status == "canceled"
    assert set(Job.objects.filter(args__run_id=str(run.id)).values_list("status", flat=True)) == {"canceled"}
    with pytest.raises(services.RunCanceled):
        services.run_retry_failed(run_id=run.id, by="test")
    with pytest.raises(services.RunCanceled):  # a job of it retried from the jobs admin does nothing
        steps.step_of({"source_id": run.source_id, "run_id": str(run.id)}, "download", uuid.uuid4())


def test_a_job_without_run_id_runs_in_compatible_mode(site, worker, caplog):
    source = source_of(site)
    services.step_job_enqueue(run_id=None, source_id=source.id, task="discover", item_key="x", args={}, scope="legacy")

    wait_for(lambda: Job.objects.filter(task="ocr", status="succeeded").count() == 3, timeout=60, what="the OCR jobs")
    assert not IngestionItem.objects.exists() and not IngestionRun.objects.exists()
    assert "compatible mode" in caplog.text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"source_id": "1"}, "source '1' not found"),
        ({"run_id": "not-a-uuid"}, "run 'not-a-uuid'"),
        ({"run_id": "00000000-0000-0000-0000-000000000000"}, "not found"),
    ],
)
def test_a_job_whose_args_name_no_source_or_run_has_nothing_to_do(site, args, message):
    run = services.run_start(source_id=source_of(site).id)
    with pytest.raises(steps.StepFailed, match=message):
        steps.step_of({"source_id": run.source_id, "run_id": str(run.id), **args}, "download", uuid.uuid4())
