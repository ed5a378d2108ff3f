"""The discover → download → ocr pipeline end to end: a real worker, a local website, real OCR."""

import shutil

import pytest

import ingestion.job_handlers  # noqa: F401  (registers the tasks and the settle task, as runworker does)
from ingestion import pipeline
from ingestion.models import IngestionItem, IngestionRun, Source
from jobs.models import Job
from jobs.worker import WorkerConfig
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.helpers import wait_for
from tests.ingestion import site as website
from tests.jobs.helpers import FAST, worker_in_thread

pytestmark = [
    ALL_DATABASES_COMMITTED,
    pytest.mark.skipif(
        not shutil.which("tesseract") or not shutil.which("pdftoppm"), reason="needs tesseract-ocr and poppler-utils"
    ),
]


@pytest.fixture(autouse=True)
def pipeline_settings(settings, tmp_path):
    settings.INGESTION_STORAGE_DIR = tmp_path
    settings.INGESTION_SETTLE_PERIOD_SEC = 0.2


@pytest.fixture
def site():
    with website.serving() as served:
        yield served


@pytest.fixture
def worker():
    with worker_in_thread(WorkerConfig.from_settings({"default": 4}, **FAST)) as running:
        yield running


def source_of(site, **fields) -> Source:
    return Source.objects.create(name=f"site-{site.base_url}", start_url=site.url("/index.html"), **fields)


def ended(run) -> IngestionRun:
    wait_for(
        lambda: IngestionRun.objects.get(id=run.id).status in ("completed", "failed", "canceled"),
        timeout=60,
        what="the run to end",
    )
    return IngestionRun.objects.get(id=run.id)


def statuses(run, stage) -> dict[str, str]:
    return {
        item.document_url.rsplit("/", 1)[-1]: item.status for item in IngestionItem.objects.filter(run=run, stage=stage)
    }


def test_a_run_discovers_downloads_and_reads_its_documents_and_a_retry_completes_it(site, worker):
    run = pipeline.run_start(source_id=source_of(site).id)
    failed = ended(run)

    assert (failed.status, failed.error_message) == ("failed", "1 item(s) failed")
    assert statuses(run, "discovery") == dict.fromkeys(
        ["text.pdf", "scan.png", "missing.pdf", "empty.pdf"], "completed"
    )
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
    assert scan.payload_json["method"] == "ocr" and "council" in scan.payload_json["excerpt"]
    assert (empty.needs_review, empty.review_reason) == (True, "too little text (0 letters)")
    broken = IngestionItem.objects.get(run=run, stage="documents", document_url__endswith="missing.pdf")
    assert broken.error_message.startswith("HTTP 404") and broken.job_id is not None
    assert failed.stats_json["ocr"] == {"total": 3, "completed": 2, "failed": 0, "review_required": 1}

    site.files["/docs/missing.pdf"] = ("application/pdf", website.pdf("A document that came back online today."))
    assert pipeline.run_retry_failed(run_id=run.id, by="test") == 1
    assert IngestionRun.objects.get(id=run.id).status == "running"
    completed = ended(run)

    assert completed.status == "completed" and completed.active_stage == "summary"
    assert statuses(run, "documents")["missing.pdf"] == "completed"
    assert statuses(run, "ocr")["missing.pdf"] == "completed"
    assert IngestionItem.objects.filter(run=run).count() == 4 + 4 + 4  # retries added no rows


def test_a_retried_discover_enqueues_nothing_twice(site):
    run = pipeline.run_start(source_id=source_of(site).id)
    step = pipeline.Step(str(run.id), run.source, job_id=Job.objects.get(task="discover").job_id)
    pipeline.discover(step=step)
    pipeline.discover(step=step)

    assert Job.objects.filter(task="download", args__run_id=str(run.id)).count() == 4
    assert IngestionItem.objects.filter(run=run).count() == 4


def test_only_allowed_hosts_and_document_links_are_followed(site):
    source = source_of(site, allowed_hosts=["elsewhere.invalid"])
    run = pipeline.run_start(source_id=source.id)
    step = pipeline.Step(str(run.id), source, job_id=Job.objects.get(task="discover").job_id)

    with pytest.raises(pipeline.StepFailed, match="not allowed"):
        pipeline.discover(step=step)  # the start page's own host is not on the list


def test_canceling_a_run_cancels_its_jobs(site):
    run = pipeline.run_start(source_id=source_of(site).id)
    pipeline.run_cancel(run_id=run.id, by="test")

    assert IngestionRun.objects.get(id=run.id).status == "canceled"
    assert Job.objects.get(task="discover", args__run_id=str(run.id)).status == "canceled"


def test_a_job_without_run_id_runs_in_compatible_mode(site, worker, caplog):
    source = source_of(site)
    pipeline._enqueue(pipeline.Step(None, source, job_id=__import__("uuid").uuid4()), "discover", "x", {})

    wait_for(lambda: Job.objects.filter(task="ocr", status="succeeded").count() == 3, timeout=60, what="the OCR jobs")
    assert not IngestionItem.objects.exists() and not IngestionRun.objects.exists()
    assert "compatible mode" in caplog.text


def test_a_run_whose_start_page_is_down_fails_naming_the_stage(site, worker):
    del site.files["/index.html"]
    run = pipeline.run_start(source_id=source_of(site).id)

    failed = ended(run)
    assert failed.status == "failed" and failed.error_message.startswith("discover: ")
    assert "HTTP 404" in failed.error_message


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"source_id": "1"}, "source '1' not found"),
        ({"run_id": "not-a-uuid"}, "run 'not-a-uuid'"),
        ({"run_id": "00000000-0000-0000-0000-000000000000"}, "not found"),
    ],
)
def test_a_job_whose_args_name_no_source_or_run_has_nothing_to_do(site, args, message):
    run = pipeline.run_start(source_id=source_of(site).id)
    with pytest.raises(pipeline.StepFailed, match=message):
        pipeline.step_of({"source_id": run.source_id, "run_id": str(run.id), **args}, "download", run.id)


def test_a_job_of_a_canceled_run_does_nothing(site):
    run = pipeline.run_start(source_id=source_of(site).id)
    pipeline.run_cancel(run_id=run.id, by="test")
    with pytest.raises(pipeline.StepFailed, match="canceled"):
        pipeline.step_of({"source_id": run.source_id, "run_id": str(run.id)}, "download", run.id)
