"""Job dependencies under a real runworker: a chain runs in order, a diamond whose middle fails
cancels what needs it and runs what may run anyway."""

import uuid

from jobs.queue import services
from jobs.queue.models import Job, JobEvent
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.e2e.conftest import runworker
from tests.helpers import wait_for

pytestmark = ALL_DATABASES_COMMITTED


def spec(name: str, task: str = "test.sleep", **fields) -> services.JobSpec:
    fields.setdefault("args", {"seconds": 0.2} if task == "test.sleep" else {})
    return services.JobSpec(queue="default", task=task, lock_key=name, job_id=uuid.uuid4(), max_attempts=1, **fields)


def test_a_chain_and_a_diamond_whose_middle_fails():
    chain = [spec("chain-1")]
    for step in range(2, 5):
        chain.append(spec(f"chain-{step}", depends_on=[chain[-1].job_id]))
    top = spec("top")
    left, right = spec("left", depends_on=[top.job_id]), spec("right", "test.fail", depends_on=[top.job_id])
    bottom = spec("bottom", depends_on=[left.job_id, right.job_id])
    cleanup = spec("cleanup", depends_on=[left.job_id, right.job_id], run_anyway=True)
    after_bottom = spec("after-bottom", depends_on=[bottom.job_id])
    # In reverse: a batch may name jobs later in it.
    services.job_enqueue_many(specs=[*reversed(chain), after_bottom, cleanup, bottom, right, left, top])
    ids = {s.lock_key: s.job_id for s in [*chain, top, left, right, bottom, cleanup, after_bottom]}

    with runworker("--queue", "default:4"):
        wait_for(
            lambda: Job.objects.filter(job_id__in=ids.values(), finished_at__isnull=True).count() == 0,
            timeout=20,
            what="every job to finish",
        )
    jobs = {job.lock_key: job for job in Job.objects.filter(job_id__in=ids.values())}
    assert {key: job.status for key, job in jobs.items()} == {
        "chain-1": "succeeded",
        "chain-2": "succeeded",
        "chain-3": "succeeded",
        "chain-4": "succeeded",
        "top": "succeeded",
        "left": "succeeded",
        "right": "failed",
        "bottom": "canceled",
        "cleanup": "succeeded",
        "after-bottom": "canceled",
    }
    for before, after in [("chain-1", "chain-2"), ("chain-2", "chain-3"), ("chain-3", "chain-4"), ("top", "left")]:
        assert jobs[after].started_at >= jobs[before].finished_at
    assert jobs["cleanup"].started_at >= max(jobs["left"].finished_at, jobs["right"].finished_at)
    assert jobs["bottom"].error == f"Upstream job {ids['right']} failed." and jobs["bottom"].attempt == 0
    assert jobs["after-bottom"].error == f"Upstream job {ids['bottom']} canceled."
    canceled = JobEvent.objects.get(job_id=ids["bottom"], kind="canceled")
    assert canceled.payload == {"reason": "upstream", "upstream": str(ids["right"]), "upstream_status": "failed"}
