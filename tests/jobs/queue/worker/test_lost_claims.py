"""Claims whose answer was lost: the jobs they took are given back at once, never a job the worker
holds or is about to hold (a claim still in flight on another thread)."""

import threading

import pytest
from django.db import IntegrityError, OperationalError

from jobs.queue import selectors, services
from jobs.queue.models import JobEvent
from jobs.queue.worker.lost_claims import LostClaims
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.jobs.conftest import enqueue, job, kinds, running_worker, wait_for_status

pytestmark = ALL_DATABASES_COMMITTED

WORKER = "host:1:lost-claims"


def broken_connection() -> OperationalError:
    """What a statement raises when the connection breaks before its answer arrives."""
    return OperationalError("server closed the connection unexpectedly")


def claim_whose_answer_is_lost(lost_claims: LostClaims, *, limit: int = 1) -> None:
    with pytest.raises(OperationalError), lost_claims.claiming():
        services.jobs_claim(queue="default", limit=limit, worker_id=WORKER)  # committed
        raise broken_connection()


def test_the_jobs_of_a_claim_whose_answer_was_lost_go_back_and_the_held_ones_stay():
    held, lost, elsewhere = (enqueue(task="t") for _ in range(3))
    lost_claims = LostClaims(worker_name=WORKER)
    with lost_claims.claiming():
        [booked] = services.jobs_claim(queue="default", limit=1, worker_id=WORKER)
    claim_whose_answer_is_lost(lost_claims)
    services.jobs_claim(queue="default", limit=1, worker_id="another-worker")

    assert lost_claims.settle(booked=lambda: {booked.lease.job_id}) == 1

    given_back = job(lost.job_id)
    assert (given_back.status, given_back.attempt, given_back.started_at) == ("queued", 0, None)
    event = JobEvent.objects.filter(job_id=lost.job_id).last()
    assert (event.kind, event.payload["reason"], event.payload["worker"]) == ("requeue", "claim_lost", WORKER)
    assert (job(held.job_id).status, job(elsewhere.job_id).status) == ("running", "running")
    assert lost_claims.settle(booked=lambda: pytest.fail("settled already: nothing to compare")) == 0


def test_nothing_is_given_back_while_another_claim_is_in_flight():
    enqueued = enqueue(task="t")
    lost_claims = LostClaims(worker_name=WORKER)
    claim_whose_answer_is_lost(lost_claims)
    inside, leave = threading.Event(), threading.Event()

    def claim_in_flight():
        with lost_claims.claiming():  # its jobs would be booked before it leaves
            inside.set()
            leave.wait(10)

    thread = threading.Thread(target=claim_in_flight)
    thread.start()
    try:
        inside.wait(5)
        assert lost_claims.settle(booked=set) == 0
        assert job(enqueued.job_id).status == "running"
    finally:
        leave.set()
        thread.join()
    assert lost_claims.settle(booked=set) == 1  # still in doubt: settled on the next pass


def test_a_claim_the_database_refused_leaves_nothing_in_doubt():
    lost_claims = LostClaims(worker_name=WORKER)
    with pytest.raises(IntegrityError), lost_claims.claiming():
        raise IntegrityError("duplicate key value violates unique constraint")
    assert lost_claims.settle(booked=lambda: pytest.fail("nothing is in doubt")) == 0


def test_a_settle_that_could_not_read_stays_in_doubt(monkeypatch):
    enqueued = enqueue(task="t")
    lost_claims = LostClaims(worker_name=WORKER)
    claim_whose_answer_is_lost(lost_claims)
    read = selectors.running_leases_picked_by

    def unreachable(**kwargs):
        raise broken_connection()

    monkeypatch.setattr(selectors, "running_leases_picked_by", unreachable)
    with pytest.raises(OperationalError):
        lost_claims.settle(booked=set)
    monkeypatch.setattr(selectors, "running_leases_picked_by", read)
    assert lost_claims.settle(booked=set) == 1
    assert job(enqueued.job_id).status == "queued"


def test_a_worker_runs_the_job_of_a_claim_whose_answer_was_lost_once_and_well_before_its_lease_ends(monkeypatch):
    claim = services.jobs_claim_from
    answers = iter(["lost"])

    def claim_then_lose_the_first_answer(**kwargs):
        claimed = claim(**kwargs)
        if claimed.jobs and next(answers, None) == "lost":
            raise broken_connection()
        return claimed

    monkeypatch.setattr(services, "jobs_claim_from", claim_then_lose_the_first_answer)
    enqueued = enqueue(task="test.echo", lease_ttl_sec=60)
    with running_worker():
        wait_for_status(enqueued.job_id, "succeeded", timeout=10)

    events = kinds(enqueued.job_id)
    assert events.count("picked") == 2 and events.count("done") == 1
    requeue = JobEvent.objects.get(job_id=enqueued.job_id, kind="requeue")
    assert requeue.payload["reason"] == "claim_lost"
    assert job(enqueued.job_id).attempt == 1  # the lost claim's attempt was given back
