"""The finished jobs per queue, status and minute that dl_jobs' triggers keep: every way a job
finishes counted once, in its minute; a retried job's runs each; nothing taken back by retries,
deletions or updates of finished jobs; folds and aging keep the sums, retention drops the old
rows, while threads finish jobs too."""

import random
import threading
from datetime import timedelta

import pytest
from django.db import connection, connections
from django.utils import timezone

from jobs.queue import services, throughput
from jobs.queue.models import Job, JobThroughput
from jobs.queue.worker.housekeeping import queue_tasks
from jobs.runtime.config import WorkerConfig
from tests.conftest import ALL_DATABASES, ALL_DATABASES_COMMITTED
from tests.db_helpers import raw_connection, run_in_threads
from tests.jobs.conftest import enqueue
from tests.jobs.helpers import FAST

pytestmark = ALL_DATABASES

WORKER = "test-worker"


def kept() -> dict[tuple[str, str], int]:
    """The kept sums per queue and status (empty sums left out)."""
    sums: dict[tuple[str, str], int] = {}
    for row in JobThroughput.objects.all():
        sums[(row.queue, row.status)] = sums.get((row.queue, row.status), 0) + row.n
    return {key: n for key, n in sums.items() if n}


def run(queue: str, kind: str, **outcome):
    """Enqueue a job on ``queue``, claim it and end its run as ``kind``; return its id."""
    enqueued = enqueue(task="t", queue=queue, max_attempts=outcome.pop("max_attempts", 5))
    [claimed] = services.jobs_claim(queue=queue, limit=1, worker_id=WORKER)
    services.jobs_complete(outcomes=[services.Outcome(lease=claimed.lease, kind=kind, **outcome)], worker_id=WORKER)
    return enqueued.job_id


def test_each_way_a_job_finishes_counts_once_and_claims_and_requeues_count_nothing():
    run("q", "succeeded")
    run("q", "fatal", error="boom")
    run("q", "error", error="again", max_attempts=1)  # no attempts left: failed
    run("q", "error", error="later")  # requeued for a retry: not finished
    assert kept() == {("q", "succeeded"): 1, ("q", "failed"): 2}

    services.job_cancel(job_id=enqueue(task="t", queue="c").job_id)  # queued: canceled at once
    stopped = enqueue(task="t", queue="c")
    [claimed] = services.jobs_claim(queue="c", limit=1, worker_id=WORKER)
    services.job_cancel(job_id=stopped.job_id)  # running: asked to stop
    services.jobs_complete(outcomes=[services.Outcome(lease=claimed.lease, kind="canceled")], worker_id=WORKER)
    assert kept()[("c", "canceled")] == 2

    enqueue(task="t", queue="l", max_attempts=1)
    services.jobs_claim(queue="l", limit=1, worker_id=WORKER)
    Job.objects.filter(queue="l").update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert services.jobs_reap().lost == 1
    assert kept()[("l", "lost")] == 1


def test_a_job_the_database_refuses_to_claim_counts_as_failed_once():
    with connection.cursor() as cursor:  # its attempt at the integer limit: the claim's + 1 is refused
        cursor.execute(
            "INSERT INTO dl_jobs (job_id, queue, task, lock_key, attempt, max_attempts) "
            "VALUES (gen_random_uuid(), 'refused', 't', 'k', 2147483647, 2147483647)"
        )

    assert len(services.jobs_set_aside_unclaimable(queue="refused", limit=10, worker_id=WORKER)) == 1
    assert kept() == {("refused", "failed"): 1}


def test_the_jobs_an_upstream_failure_cancels_count_as_canceled():
    upstream = enqueue(task="t", queue="up")
    enqueue(task="t", queue="down", depends_on=[upstream.job_id])
    enqueue(task="t", queue="down", depends_on=[upstream.job_id])
    [claimed] = services.jobs_claim(queue="up", limit=1, worker_id=WORKER)
    services.jobs_complete(
        outcomes=[services.Outcome(lease=claimed.lease, kind="fatal", error="boom")], worker_id=WORKER
    )

    assert kept() == {("up", "failed"): 1, ("down", "canceled"): 2}


def test_a_retried_job_counts_each_run_and_retries_and_deletions_take_nothing_back():
    failed = run("q", "fatal", error="boom")
    services.job_retry(job_id=failed)
    assert kept() == {("q", "failed"): 1}  # the first run failed, whatever comes next

    [claimed] = services.jobs_claim(queue="q", limit=1, worker_id=WORKER)
    services.jobs_complete(outcomes=[services.Outcome(lease=claimed.lease, kind="succeeded")], worker_id=WORKER)
    services.job_delete(job_id=failed)

    assert kept() == {("q", "failed"): 1, ("q", "succeeded"): 1}


def test_an_update_of_a_job_already_finished_counts_nothing_again():
    job_id = run("q", "succeeded")

    Job.objects.filter(job_id=job_id).update(finished_at=timezone.now() - timedelta(hours=3), status="failed")
    Job.objects.filter(job_id=job_id).update(error="noted")

    assert kept() == {("q", "succeeded"): 1}


def test_a_job_inserted_finished_counts_in_its_minute():
    earlier = (timezone.now() - timedelta(hours=3)).replace(second=0, microsecond=0)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO dl_jobs (job_id, queue, task, lock_key, status, finished_at) "
            "VALUES (gen_random_uuid(), 'loaded', 't', 'k', 'lost', %s)",
            [earlier],
        )

    assert [(row.status, row.minute, row.n) for row in JobThroughput.objects.all()] == [("lost", earlier, 1)]


def test_the_fold_sums_each_minutes_rows_into_one():
    for _ in range(3):
        run("q", "succeeded")
    run("q", "fatal", error="boom")
    before = kept()
    assert JobThroughput.objects.filter(folded=False).count() == 4

    assert services.job_throughput_fold() == {"folded": 2}  # 4 rows, one per status and minute left
    assert kept() == before
    assert JobThroughput.objects.count() == 2 and not JobThroughput.objects.filter(folded=False).exists()
    run("q", "succeeded")
    services.job_throughput_fold()
    assert kept() == {("q", "succeeded"): 4, ("q", "failed"): 1} and JobThroughput.objects.count() == 2


def old(minute, n: int, folded: bool = True) -> JobThroughput:
    return JobThroughput.objects.create(queue="q", status="succeeded", minute=minute, n=n, folded=folded)


@pytest.mark.parametrize("retention_days", [35, 35.0, 20.5])  # the setting may be a fraction
def test_aging_folds_old_minutes_into_quarter_hours_then_hours_and_drops_the_oldest(retention_days):
    hour = (timezone.now() - timedelta(days=3)).replace(minute=0, second=0, microsecond=0)
    for offset, n in ((0, 1), (5, 2), (59, 4)):
        old(hour + timedelta(minutes=offset), n)
    old(hour + timedelta(hours=1, minutes=7), 8, folded=False)  # appended late (a rewritten end)
    this_minute = timezone.now().replace(second=0, microsecond=0)
    quarter = (this_minute - timedelta(hours=3)).replace(minute=(this_minute.minute // 15) * 15)
    for offset, n in ((1, 64), (14, 128), (15, 256)):
        old(quarter + timedelta(minutes=offset), n)
    recent = old(this_minute - timedelta(hours=1), 16)  # the hour window's: kept a minute
    old(timezone.now() - timedelta(days=retention_days, minutes=1), 32)

    result = services.job_throughput_age(retention_days=retention_days)

    assert result == {"folded": 3, "dropped": 1}
    rows = sorted((row.minute, row.n) for row in JobThroughput.objects.all())
    assert rows == [
        (hour, 7),
        (hour + timedelta(hours=1), 8),
        (quarter, 192),
        (quarter + timedelta(minutes=15), 256),
        (recent.minute, 16),
    ]
    assert services.job_throughput_age(retention_days=retention_days) == {"folded": 0, "dropped": 0}


def test_after_aging_the_day_window_reads_a_row_a_quarter_hour_but_in_its_last_90_minutes():
    this_minute = timezone.now().replace(second=0, microsecond=0)
    minutes = [this_minute - timedelta(minutes=back) for back in range(3 * 24 * 60)]  # every minute of 3 days
    JobThroughput.objects.bulk_create(
        JobThroughput(queue="q", status="succeeded", minute=minute, n=1, folded=True) for minute in minutes
    )

    services.job_throughput_age(retention_days=35)

    day = JobThroughput.objects.filter(minute__gte=this_minute - timedelta(days=1))
    assert day.count() <= 96 + 90 + 15  # the quarters, and the minutes of the last 90 (to a quarter's start)
    assert JobThroughput.objects.filter(minute__lt=this_minute - timedelta(days=2, hours=1)).count() <= 24
    assert kept() == {("q", "succeeded"): len(minutes)}


def test_a_window_reads_its_buckets_by_status_and_queue():
    run("a", "succeeded")
    run("a", "succeeded")
    run("b", "fatal", error="boom")
    now = timezone.now()
    origin = now.replace(hour=0, minute=0, second=0, microsecond=0)

    rows = throughput.finished(since=now - timedelta(hours=1), step=timedelta(minutes=15), origin=origin)

    bucket = origin + (now - origin) // timedelta(minutes=15) * timedelta(minutes=15)
    assert sorted(rows) == [("a", "succeeded", bucket, 2), ("b", "failed", bucket, 1)]


RECOUNT = (
    "SELECT queue, status::text, date_bin('1 minute', finished_at, TIMESTAMPTZ '2000-01-01 00:00:00+00'), count(*) "
    "FROM dl_jobs WHERE finished_at IS NOT NULL GROUP BY 1, 2, 3"
)


@ALL_DATABASES_COMMITTED
def test_the_sums_stay_exact_while_threads_finish_jobs_and_the_folder_runs():
    with raw_connection(autocommit=True) as conn:
        conn.execute(
            "INSERT INTO dl_jobs (job_id, queue, task, lock_key) "
            "SELECT gen_random_uuid(), 'q' || (i % 3), 't', 'k' || i FROM generate_series(1, 1200) AS i"
        )
    folding = threading.Event()

    def fold_until_told():
        try:
            while not folding.is_set():
                throughput.fold()
        finally:
            connections.close_all()

    def finish(index: int) -> None:
        rng = random.Random(index)
        with raw_connection(autocommit=True) as conn:
            for _ in range(60):
                conn.execute(  # SKIP LOCKED: the writers race the folder, not each other
                    "UPDATE dl_jobs SET status = %(status)s, finished_at = now() WHERE job_id IN ("
                    "SELECT job_id FROM dl_jobs WHERE finished_at IS NULL LIMIT 5 FOR UPDATE SKIP LOCKED)",
                    {"status": rng.choice(["succeeded", "failed", "canceled", "lost"])},
                )

    folder = threading.Thread(target=fold_until_told)
    folder.start()
    try:
        run_in_threads(4, finish)
    finally:
        folding.set()
        folder.join()

    def per_minute() -> list[tuple]:
        with raw_connection() as conn:
            return sorted(
                conn.execute(
                    "SELECT queue, status::text, minute, sum(n) FROM dl_job_throughput GROUP BY 1, 2, 3 HAVING sum(n) <> 0"
                ).fetchall()
            )

    with raw_connection() as conn:
        recounted = sorted(conn.execute(RECOUNT).fetchall())
    assert sum(row[-1] for row in recounted) == 1200 and per_minute() == recounted
    throughput.fold()
    assert per_minute() == recounted
    assert JobThroughput.objects.count() == len(recounted)  # one row per queue, status and minute


def test_the_housekeeping_folds_and_ages_them_with_the_settings(settings):
    settings.DL_THROUGHPUT_RETENTION_DAYS = 35.0  # as env_number reads it
    tasks = {task.name: task for task in queue_tasks(WorkerConfig.from_settings({}, **FAST))}
    run("q", "succeeded")
    old(timezone.now() - timedelta(days=36), 5)

    assert tasks["jobs.throughput"].work() == {"folded": 0}  # one appended row: kept, marked folded
    assert tasks["jobs.throughput_age"].work() == {"folded": 0, "dropped": 1}
    assert kept() == {("q", "succeeded"): 1} and not JobThroughput.objects.filter(folded=False).exists()
