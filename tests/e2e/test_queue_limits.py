"""Queue limits with real runworker processes: 4 workers × 8 slots never run more than a queue's
max_running at once (sampled from the database), and never start more than its rate."""

import threading
import time
from contextlib import ExitStack

from jobs.queue import services
from jobs.queue.models import Job
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.db_helpers import raw_connection
from tests.e2e.conftest import runworker, status_counts
from tests.helpers import wait_for

pytestmark = ALL_DATABASES_COMMITTED

WORKERS = 4


def enqueue(queue: str, count: int, seconds: float) -> None:
    services.job_enqueue_many(
        specs=[
            services.JobSpec(queue=queue, task="test.sleep", args={"seconds": seconds}, lock_key=f"{queue}-{i}")
            for i in range(count)
        ]
    )


def running_samples(queue: str, until: threading.Event) -> list[int]:
    """The queue's running jobs counted every ~10 ms, from a connection of the test's own."""
    samples = []
    with raw_connection("default", autocommit=True) as conn:
        while not until.is_set():
            count = conn.execute("SELECT count(*) FROM dl_jobs WHERE queue = %s AND status = 'running'", [queue])
            samples.append(count.fetchone()[0])
            time.sleep(0.01)
    return samples


def test_max_running_holds_across_four_workers_and_a_rate_is_kept():
    services.queue_limits_set(queue="capped", by="test", max_running=3, create=True)
    services.queue_limits_set(queue="paced", by="test", rate_limit=10, rate_period_sec=1, create=True)
    enqueue("capped", 200, 0.05)
    enqueue("paced", 35, 0.01)
    done, samples = threading.Event(), []
    sampler = threading.Thread(target=lambda: samples.extend(running_samples("capped", done)))
    sampler.start()
    try:
        with ExitStack() as workers:
            for _ in range(WORKERS):
                workers.enter_context(runworker("--queue", "capped:8", "--queue", "paced:8"))
            wait_for(lambda: status_counts().get("succeeded", 0) == 235, timeout=30, what="every job to succeed")
    finally:
        done.set()
        sampler.join()

    assert status_counts() == {"succeeded": 235}
    assert max(samples) == 3, f"running counts sampled: max {max(samples)}"
    starts = sorted(Job.objects.filter(queue="paced").values_list("started_at", flat=True))
    # At most 10 started in any 1-second window (t - 1 s, t]; 35 jobs so take over 3 s.
    busiest = max(sum(1 for other in starts if 0 <= (start - other).total_seconds() < 1) for start in starts)
    assert busiest == 10
    assert (starts[-1] - starts[0]).total_seconds() >= 3
