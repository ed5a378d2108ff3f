"""Job dependencies: jobs wait for others, are released or canceled by the trigger on every path."""

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.queue import services
from jobs.queue.models import Job, JobEvent
from jobs.queue.services.leases import Lease
from jobs.queue.states import WAITING_AVAILABLE_AT
from pipeline_project.api.errors import InvalidInputError
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.db_helpers import run_in_threads
from tests.jobs.conftest import enqueue, job

pytestmark = ALL_DATABASES_COMMITTED


def end(job_id, status):
    """An upstream job ends (an UPDATE statement, as every path's)."""
    Job.objects.filter(job_id=job_id).update(status=status)


def waiting(job_id) -> bool:
    row = job(job_id)
    return row.status == "queued" and row.available_at == WAITING_AVAILABLE_AT


def ready(job_id) -> bool:
    row = job(job_id)
    return row.status == "queued" and row.available_at < WAITING_AVAILABLE_AT


def last_event(job_id) -> JobEvent:
    return JobEvent.objects.filter(job_id=job_id).last()


def test_a_chain_waits_then_runs_in_order_and_a_failure_cancels_the_rest():
    a = enqueue(task="t").job_id
    b = enqueue(task="t", depends_on=[a]).job_id
    c = enqueue(task="t", depends_on=[b]).job_id
    assert not waiting(a) and waiting(b) and waiting(c)
    assert last_event(b).payload["depends_on"] == [str(a)]

    end(a, "succeeded")
    assert ready(b) and waiting(c)
    assert (last_event(b).kind, last_event(b).payload["reason"]) == ("requeue", "upstream succeeded")

    end(b, "failed")
    row = job(c)
    assert row.status == "canceled" and row.error == f"Upstream job {b} failed."
    assert last_event(c).kind == "canceled"
    assert last_event(c).payload == {"reason": "upstream", "upstream": str(b), "upstream_status": "failed"}


def test_a_diamond_with_a_failure_in_the_middle():
    a = enqueue(task="t").job_id
    b = enqueue(task="t", depends_on=[a]).job_id
    c = enqueue(task="t", depends_on=[a]).job_id
    d = enqueue(task="t", depends_on=[b, c]).job_id
    end(a, "succeeded")
    assert ready(b) and ready(c) and waiting(d)

    end(c, "failed")
    assert job(d).status == "canceled" and job(d).error == f"Upstream job {c} failed."
    assert ready(b)  # the other branch goes on


def test_a_diamond_released_when_both_branches_succeed_at_the_requested_time():
    a = enqueue(task="t").job_id
    b = enqueue(task="t", depends_on=[a]).job_id
    c = enqueue(task="t", depends_on=[a]).job_id
    later = WAITING_AVAILABLE_AT.replace(year=2100)
    d = enqueue(task="t", depends_on=[b, c], available_at=later).job_id
    for upstream in (a, b):
        end(upstream, "succeeded")
    assert waiting(d)
    end(c, "succeeded")
    assert job(d).status == "queued" and job(d).available_at == later


def test_run_anyway_runs_once_every_upstream_finished_whatever_its_end():
    a, b = enqueue(task="t").job_id, enqueue(task="t").job_id
    c = enqueue(task="t", depends_on=[a, b], run_anyway=True).job_id
    end(a, "failed")
    assert waiting(c)
    end(b, "lost")
    assert ready(c)


def test_cancelling_cascades_down_and_retrying_brings_the_jobs_back():
    a = enqueue(task="t").job_id
    b = enqueue(task="t", depends_on=[a]).job_id
    c = enqueue(task="t", depends_on=[b]).job_id
    services.job_cancel(job_id=a, requested_by="ops")
    assert job(b).status == "canceled" and job(c).status == "canceled"
    assert job(c).error == f"Upstream job {b} canceled."

    assert services.job_retry(job_id=a, requested_by="ops")
    assert ready(a) and waiting(b) and waiting(c)
    assert last_event(b).kind == "queued"
    assert last_event(b).payload == {"reason": "upstream retried", "upstream": str(a), "waiting": True}
    assert job(b).error is None and not job(b).cancel_requested


def test_retrying_a_failed_upstream_lets_its_dependents_go_on():
    a = enqueue(task="t").job_id
    b = enqueue(task="t", depends_on=[a]).job_id
    c = enqueue(task="t", depends_on=[b]).job_id
    end(a, "succeeded")
    end(b, "failed")
    assert job(c).status == "canceled"

    services.job_retry(job_id=b, requested_by="ops")
    assert ready(b) and waiting(c)
    end(b, "succeeded")
    assert ready(c)


def test_retrying_a_dependent_whose_upstream_still_runs_makes_it_wait_again():
    a = enqueue(task="t").job_id
    b = enqueue(task="t", depends_on=[a]).job_id
    services.job_cancel(job_id=b, requested_by="ops")
    services.job_retry(job_id=b, requested_by="ops")
    assert waiting(b)


def test_through_the_worker_protocol():
    a = enqueue(task="t", queue="dep-protocol").job_id
    b = enqueue(task="t", queue="dep-protocol", depends_on=[a]).job_id
    assert [c.lease.job_id for c in services.jobs_claim(queue="dep-protocol", limit=5, worker_id="w")] == [a]
    lease = Lease(job_id=a, attempt=1, started_at=job(a).started_at)
    status, claimed = services.job_complete_and_claim(
        outcome=services.Outcome(lease=lease, kind="succeeded"), queue="dep-protocol", worker_id="w"
    )
    # The trigger runs after the statement: b is released then, for the next claim.
    assert status == "succeeded" and claimed is None and ready(b)
    assert [c.lease.job_id for c in services.jobs_claim(queue="dep-protocol", limit=5, worker_id="w")] == [b]


def test_a_lost_upstream_cancels_its_dependent_through_the_reaper():
    a = enqueue(task="t", queue="dep-reaped", max_attempts=1).job_id
    b = enqueue(task="t", depends_on=[a]).job_id
    services.jobs_claim(queue="dep-reaped", limit=1, worker_id="w")
    Job.objects.filter(job_id=a).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert services.jobs_reap().lost == 1
    assert job(b).status == "canceled" and job(b).error == f"Upstream job {a} lost."


def test_a_long_chain_is_canceled_level_by_level_not_by_recursion():
    ids = [uuid.uuid4() for _ in range(500)]
    services.job_enqueue_many(
        specs=[spec(job_id=job_id, depends_on=ids[index - 1 : index]) for index, job_id in enumerate(ids)]
    )
    end(ids[0], "failed")  # a recursion 500 triggers deep would exhaust PostgreSQL's stack
    assert Job.objects.filter(job_id__in=ids[1:], status="canceled").count() == 499
    services.job_retry(job_id=ids[0], requested_by="ops")
    assert Job.objects.filter(job_id__in=ids[1:], status="queued", available_at=WAITING_AVAILABLE_AT).count() == 499


def test_upstream_jobs_already_finished():
    done = enqueue(task="t").job_id
    end(done, "succeeded")
    assert services.job_enqueue(spec=spec(depends_on=[done])).status == "queued"
    failed = enqueue(task="t").job_id
    end(failed, "failed")
    enqueued = services.job_enqueue(spec=spec(depends_on=[done, failed]))
    assert enqueued.status == "canceled" and job(enqueued.job_id).error == f"Upstream job {failed} failed."
    assert services.job_enqueue(spec=spec(depends_on=[failed], run_anyway=True)).status == "queued"


def spec(**fields) -> services.JobSpec:
    return services.JobSpec(**{"queue": "default", "task": "t", "lock_key": uuid.uuid4().hex, **fields})


def test_a_batch_may_wait_for_its_own_jobs_but_not_in_a_cycle():
    first, second = uuid.uuid4(), uuid.uuid4()
    enqueued = services.job_enqueue_many(specs=[spec(job_id=first), spec(job_id=second, depends_on=[first])])
    assert [e.status for e in enqueued] == ["queued", "queued"] and waiting(second)

    x, y, z = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    with pytest.raises(InvalidInputError) as raised:
        services.job_enqueue_many(
            specs=[spec(job_id=x, depends_on=[z]), spec(job_id=y, depends_on=[x]), spec(job_id=z, depends_on=[y])]
        )
    assert set(raised.value.details["jobs"]) == {"0", "1", "2"}
    assert "depends_on" in raised.value.details["jobs"]["0"]
    assert not Job.objects.filter(job_id__in=[x, y, z]).exists()


def test_unknown_ids_self_and_too_many_are_refused_and_nothing_is_written():
    known = enqueue(task="t").job_id
    missing = uuid.uuid4()
    before = Job.objects.count()
    with pytest.raises(InvalidInputError) as raised:
        services.job_enqueue(spec=spec(depends_on=[known, missing]))
    assert raised.value.details == {"jobs": {"0": {"depends_on": [f"No job {missing}."]}}}
    own = uuid.uuid4()
    with pytest.raises(InvalidInputError) as raised:
        services.job_enqueue(spec=spec(job_id=own, depends_on=[own]))
    assert "depends_on" in raised.value.details["jobs"]["0"]
    with pytest.raises(InvalidInputError):
        services.job_enqueue(spec=spec(depends_on=[uuid.uuid4() for _ in range(services.MAX_DEPENDS_ON + 1)]))
    assert Job.objects.count() == before


def test_waiting_for_a_later_job_of_the_same_lock_key_is_refused():
    upstream = enqueue(task="t", lock_key="k", priority=50).job_id
    with pytest.raises(InvalidInputError) as raised:
        services.job_enqueue(spec=spec(lock_key="k", priority=10, depends_on=[upstream]))
    assert "depends_on" in raised.value.details["jobs"]["0"]
    assert waiting(services.job_enqueue(spec=spec(lock_key="k", priority=50, depends_on=[upstream])).job_id)


def test_deleting_an_upstream_job_cancels_the_jobs_waiting_for_it():
    a = enqueue(task="t").job_id
    b = enqueue(task="t", depends_on=[a]).job_id
    c = enqueue(task="t", depends_on=[b]).job_id
    services.job_delete(job_id=a)
    assert job(b).status == "canceled" and job(b).error == f"Upstream job {a} deleted."
    assert last_event(b).payload == {"reason": "upstream deleted", "upstream": str(a)}
    assert job(c).status == "canceled"


def test_an_upstream_ending_while_its_dependent_is_enqueued_never_strands_it():
    for _ in range(10):
        upstream = enqueue(task="t").job_id

        def race(index, *, upstream=upstream):
            if index == 0:
                return end(upstream, "succeeded")
            return services.job_enqueue(spec=spec(depends_on=[upstream])).job_id

        assert ready(run_in_threads(2, race)[1])


def test_two_upstreams_ending_at_once_release_their_dependent():
    for _ in range(10):
        upstreams = [enqueue(task="t").job_id, enqueue(task="t").job_id]
        d = enqueue(task="t", depends_on=upstreams).job_id
        run_in_threads(2, lambda index, *, upstreams=upstreams: end(upstreams[index], "succeeded"))
        assert ready(d)
