"""What the queues do now: each queue's wait and run times over the last hour (the journal's newest
events at most), and the jobs the named workers run."""

from datetime import timedelta

from django.utils import timezone

from jobs.queue import activity, services
from jobs.queue.models import JobEvent
from tests.conftest import ALL_DATABASES
from tests.jobs.conftest import enqueue

pytestmark = ALL_DATABASES


def run(queue: str, *durations_ms: float, worker: str = "w") -> None:
    for duration in durations_ms:
        enqueue(task="t", queue=queue)
        [claimed] = services.jobs_claim(queue=queue, limit=1, worker_id=worker)
        outcome = services.Outcome(lease=claimed.lease, kind="succeeded", duration_ms=duration)
        services.jobs_complete(outcomes=[outcome], worker_id=worker)


def test_run_and_wait_times_per_queue_over_the_last_hour():
    run("etl", 100.0, 200.0, 300.0)
    run("old", 1000.0)
    JobEvent.objects.filter(queue="old").update(ts=timezone.now() - timedelta(hours=2))

    times = activity.run_times()

    assert set(times) == {"etl"}
    assert times["etl"]["run"] == {"p50": 0.2, "p95": 0.29}
    assert 0 <= times["etl"]["wait"]["p50"] <= times["etl"]["wait"]["p95"] < 60


def test_the_times_read_the_newest_events_only(monkeypatch):
    run("etl", 100.0)
    run("etl", 900.0)
    monkeypatch.setattr(activity, "TIMES_EVENTS", 2)  # the second job's pick and end

    assert activity.run_times()["etl"]["run"] == {"p50": 0.9, "p95": 0.9}


def test_the_jobs_each_named_worker_runs_longest_first():
    first, second = enqueue(task="a", queue="q"), enqueue(task="b", queue="q")
    services.jobs_claim(queue="q", limit=1, worker_id="h:1:aaaa")
    services.jobs_claim(queue="q", limit=1, worker_id="h:2:bbbb")
    enqueue(task="c", queue="q")
    services.jobs_claim(queue="q", limit=1, worker_id="gone:3:cccc")

    rows = activity.running_jobs(worker_names=["h:1:aaaa", "h:2:bbbb"], limit=10)

    assert [(job_id, task, queue, worker) for job_id, task, queue, _started, worker in rows] == [
        (first.job_id, "a", "q", "h:1:aaaa"),
        (second.job_id, "b", "q", "h:2:bbbb"),
    ]
    assert activity.running_jobs(worker_names=["h:1:aaaa", "h:2:bbbb"], limit=1) == rows[:1]
    assert activity.running_jobs(worker_names=[], limit=10) == []
