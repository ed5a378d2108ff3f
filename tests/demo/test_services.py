"""demo_install makes every system's part of the demo once; demo_remove takes exactly it away."""

import json

import pytest
from django.conf import settings

from ingestion.models import IngestionRun, Source
from jobs.dbstates.models import PrepareJob
from jobs.processes.models import Process, Task
from jobs.queue import services as job_services
from jobs.queue.models import Job
from jobs.queue.states import WAITING_AVAILABLE_AT
from jobs.schedules import services as schedule_services
from jobs.schedules.models import Schedule
from pipeline_project.api.errors import InvalidInputError
from pipeline_project.demo import config, services, tracking
from tests.demo.helpers import row_counts
from tracking import services as tracking_services
from tracking.models import PipelineTracking

pytestmark = pytest.mark.django_db(databases=["default", "pipeline"])
BASE = "http://127.0.0.1:8123"


def test_install_makes_the_source_and_its_run_the_jobs_schedule_processes_files_and_state():
    outcome = services.demo_install(base_url=BASE + "/")

    assert outcome.counts == {
        "source": 1,
        "run": 1,
        "jobs": 12,
        "schedule": 1,
        "processes": 3,
        "database state": 1,
        "tracked rows": 9,
    }
    source = Source.objects.get(name=config.SOURCE_NAME)
    assert source.start_url == f"{BASE}/demo/site/index.html"
    run = IngestionRun.objects.get(source=source)
    assert run.status == "pending"
    assert Job.objects.filter(task="discover", args__run_id=str(run.id), status="queued").count() == 1

    demo_jobs = Job.objects.filter(queue__in=config.QUEUES)
    assert set(demo_jobs.values_list("queue", flat=True)) == set(config.QUEUES)
    assert {"demo.work", "demo.flaky", "demo.broken"} == set(demo_jobs.values_list("task", flat=True))
    assert all(key.startswith("demo:") for key in demo_jobs.values_list("idempotency_key", flat=True))
    waiting = demo_jobs.filter(available_at=WAITING_AVAILABLE_AT)
    assert waiting.count() == 5  # every dependent job waits for its upstream jobs
    assert waiting.get(idempotency_key="demo:monthly-report").args == {"report": "monthly", "seconds": 2}

    schedule = Schedule.objects.get(name=config.SCHEDULE_NAME)
    assert (schedule.interval_sec, schedule.queue, schedule.task) == (10, "demo-etl", "demo.tracking-tick")
    processes = Process.objects.filter(namespace="demo")
    assert sorted(processes.values_list("process_id", flat=True)) == sorted(config.PROCESS_IDS)
    assert set(processes.values_list("status", flat=True)) == {"init"}
    assert Task.objects.filter(process__namespace="demo", task_type="init", status="waiting").count() == 3

    prepare = PrepareJob.objects.get(request__stdin=config.STATE_SQL)
    assert Job.objects.get(job_id=prepare.queue_job_id).queue == "sqlrs"

    rows = PipelineTracking.objects.using("pipeline").filter(filename__startswith="demo-")
    assert rows.count() == 9
    statuses = {
        (row.filename[-6:], row.shard): (row.shard_splitter_status, row.shard_worker_status, row.mysql_sender_status)
        for row in rows
    }
    assert statuses[("000000", 2)] == ("done", "done", "done")  # the first file went all the way
    assert [statuses[("010000", shard)] for shard in (0, 1, 2)] == [
        ("done", "done", "new"),
        ("done", "started", "new"),
        ("done", "failed", "new"),  # an operator's retry in the admin has work
    ]
    assert set(rows.filter(filename__endswith="020000").values_list("event_ingest_status", flat=True)) == {"started"}


def test_install_twice_changes_nothing():
    services.demo_install(base_url=BASE)
    before = row_counts()

    outcome = services.demo_install(base_url=BASE)

    assert set(outcome.counts.values()) == {0}
    assert row_counts() == before
    empty = {table for table, count in before.items() if not count}
    assert empty == {"ingestion_items", "ingestion_run_counts", "dl_proc_events"}  # nothing ran yet


def test_a_new_base_url_moves_the_source_and_makes_nothing_else():
    services.demo_install(base_url=BASE)
    before = row_counts()

    services.demo_install(base_url="http://localhost:9000")

    assert Source.objects.get(name=config.SOURCE_NAME).start_url == "http://localhost:9000/demo/site/index.html"
    assert row_counts() == before


@pytest.mark.parametrize("base_url", ["ftp://127.0.0.1", "127.0.0.1:8000", "http://127.0.0.1:8000/somewhere"])
def test_a_base_url_that_is_not_an_origin_is_refused_and_nothing_is_made(base_url):
    with pytest.raises(InvalidInputError, match="base URL"):
        services.demo_install(base_url=base_url)

    assert not Source.objects.exists() and not Job.objects.exists()


def _others() -> dict:
    """Rows that are not the demo's: each system has one, which remove must leave alone."""
    source = Source.objects.create(name="City hall", start_url="http://127.0.0.1:9/index.html")
    job = job_services.job_enqueue(spec=job_services.JobSpec(queue="default", task="reports.build", lock_key="r"))
    schedule = schedule_services.schedule_create(
        values={"name": "reports.daily", "task": "reports.build", "cron": "0 6 * * *"}, by="test"
    )
    tracking_services.file_register(filename="20250101000000", shards=[0, 1])
    return {"source": source.id, "job": job.job_id, "schedule": schedule.id}


def test_remove_deletes_all_of_the_demo_and_nothing_else():
    others = _others()
    before = row_counts()
    services.demo_install(base_url=BASE)

    outcome = services.demo_remove()

    assert outcome.counts == {
        "runs": 1,
        "jobs": 12,
        "schedule": 1,
        "processes": 3,
        "database state jobs": 1,
        "tracked rows": 9,
    }
    after = row_counts()
    # The *_counts tables are appended to by triggers (a deletion adds its negative counts).
    assert {t: n for t, n in after.items() if "counts" not in t} == {
        t: n for t, n in before.items() if "counts" not in t
    }
    assert Source.objects.get().id == others["source"]
    assert Job.objects.get().job_id == others["job"]
    assert Schedule.objects.get().id == others["schedule"]
    assert list(PipelineTracking.objects.using("pipeline").values_list("filename", flat=True)) == ["20250101000000"] * 2
    assert not Process.objects.exists() and not PrepareJob.objects.exists()
    assert set(services.demo_remove().counts.values()) == {0}  # nothing left to remove


def test_the_schedules_tick_moves_the_demos_files_on_and_no_other_file():
    tracking_services.file_register(filename="20250101000000", shards=[0])
    services.demo_install(base_url=BASE)

    first = tracking.tracking_advance()

    assert first["moved"][0] == "demo-20250101020000 event-ingest done"
    assert len(first["moved"]) == tracking.ROWS_PER_TICK
    for _tick in range(30):
        tracking.tracking_advance()
    rows = PipelineTracking.objects.using("pipeline")
    assert rows.filter(filename__startswith="demo-", mysql_sender_status="done").count() == 8  # all but the failed
    assert rows.get(filename="20250101000000").event_ingest_status == "started"  # not the demo's: untouched


def test_runservices_worker_serves_the_demos_queues_and_namespace():
    served = json.loads(settings.RUNSERVICE_WORKERS_JSON)

    assert {entry.get("queue") for entry in served} >= {*config.QUEUES, "default", "sqlrs"}
    assert {"namespace": config.NAMESPACE, "concurrency": 2} in served
