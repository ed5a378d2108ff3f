from datetime import timedelta

from django.utils import timezone

from jobs.queue import selectors, services
from jobs.queue.models import Job, Worker
from tests.conftest import ALL_DATABASES
from tests.jobs.conftest import enqueue

pytestmark = ALL_DATABASES


def test_next_available_at_is_the_soonest_future_job_of_the_given_queues():
    now = timezone.now()
    enqueue(task="t", queue="a", available_at=now + timedelta(minutes=5))
    enqueue(task="t", queue="b", available_at=now + timedelta(minutes=1))
    enqueue(task="t", queue="c", available_at=now + timedelta(seconds=10))
    enqueue(task="t", queue="a")  # available now: not a timer

    assert selectors.next_available_at(queues=["a", "b"]) == now + timedelta(minutes=1)
    assert selectors.next_available_at(queues=["nothing"]) is None


def test_job_counts_with_args_count_each_status_up_to_one_past_the_cut():
    for number in range(5):
        enqueue(task="t", args={"run_id": "r1", "n": number})
    running = enqueue(task="t", args={"run_id": "r1"})
    Job.objects.filter(job_id=running.job_id).update(status="running")
    enqueue(task="t", args={"run_id": "r2"})
    enqueue(task="t", args={"source_id": "r1"})

    assert selectors.job_counts_with_args(values={"run_id": "r1"}, at_most=3) == {"queued": 4, "running": 1}
    assert selectors.job_counts_with_args(values={"run_id": "r1"}, at_most=10) == {"queued": 5, "running": 1}
    assert selectors.job_counts_with_args(values={"run_id": "r1", "n": "2"}, at_most=10) == {"queued": 1}
    assert selectors.job_counts_with_args(values={"run_id": "r3"}, at_most=10) == {}


def test_next_available_at_counts_a_job_that_came_due_since_the_last_claim_began():
    """A job that came due between a worker's claim (which found it not yet available) and this
    read: without the claim's time, no timer and no NOTIFY, and it waited for the safety sweep."""
    came_due = timezone.now() - timedelta(seconds=2)
    enqueue(task="t", queue="d", available_at=came_due)

    assert selectors.next_available_at(queues=["d"]) is None  # due before the claim: a busy key's
    assert selectors.next_available_at(queues=["d"], due_since_sec=5) == came_due  # claim at once


def test_queue_depths_by_queue_and_status():
    for queue in ["a", "a", "b"]:
        enqueue(task="t", queue=queue)
    Job.objects.filter(queue="b").update(status="failed")

    assert selectors.queue_depths() == {"a": {"queued": 2}, "b": {"failed": 1}}


def test_live_workers_and_status_section():
    services.worker_register(worker_id="00000000-0000-0000-0000-000000000001", hostname="h1", pid=1, queues={"a": 2})
    services.worker_register(worker_id="00000000-0000-0000-0000-000000000002", hostname="h2", pid=2, queues={"a": 1})
    Worker.objects.filter(hostname="h2").update(heartbeat_at=timezone.now() - timedelta(hours=1))
    enqueue(task="t", queue="a")

    name, section = selectors.status_section()

    assert name == "jobs"
    assert [(worker["hostname"], worker["alive"]) for worker in section["workers"]] == [("h1", True), ("h2", False)]
    assert section["workers"][1]["last_seen_at"] < timezone.now() - timedelta(minutes=59)
    assert [worker.hostname for worker in selectors.live_workers()] == ["h1"]
    assert section["queues"] == {"a": {"queued": 1}}
    assert section["paused_queues"] == [] and section["periodic_tasks"] == []


def test_queues_show_depth_and_pause_state():
    enqueue(task="t", queue="a")
    services.queue_pause(queue="b", by="ops", create=True)

    assert [(q["name"], q["paused"], q["depth"], q["changed_by"]) for q in selectors.queues()] == [
        ("a", False, {"queued": 1}, ""),
        ("b", True, {}, "ops"),
    ]
    assert selectors.status_section()[1]["paused_queues"] == ["b"]


def test_status_section_shows_when_each_periodic_task_last_ran():
    services.periodic_task_run(name="jobs.reap", period_sec=10, runner="h1:1", work=lambda: {"requeued": 2})

    [task] = selectors.status_section()[1]["periodic_tasks"]

    assert (task["name"], task["last_runner"], task["last_result"]) == ("jobs.reap", "h1:1", {"requeued": 2})
    assert task["last_started_at"] <= task["last_finished_at"]


def test_status_endpoint_shows_workers_and_queues(api):
    services.worker_register(worker_id="00000000-0000-0000-0000-000000000003", hostname="h3", pid=3, queues={"a": 2})

    body = api.get("/status").json()

    assert body["jobs"]["workers"][0]["hostname"] == "h3"
    assert "queues" in body["jobs"]


def test_jobs_with_args_are_those_holding_each_value_as_text_in_the_given_statuses():
    first = enqueue(task="t", args={"run_id": "r1", "source_id": 7})
    second = enqueue(task="t", args={"run_id": "r1", "source_id": 8})
    enqueue(task="t", args={"run_id": "r2", "source_id": 7})
    enqueue(task="t", args={"source_id": 7})
    Job.objects.filter(job_id=second.job_id).update(status="failed")

    of_run = selectors.jobs_with_args(values={"run_id": "r1"})
    assert [job.job_id for job in of_run] == [first.job_id, second.job_id]  # oldest first
    assert [job.job_id for job in selectors.jobs_with_args(values={"run_id": "r1"}, statuses=["failed"])] == [
        second.job_id
    ]
    assert selectors.jobs_with_args(values={"run_id": "r1", "source_id": "7"}).get().job_id == first.job_id
    assert not selectors.jobs_with_args(values={"run_id": "r3"}).exists()
