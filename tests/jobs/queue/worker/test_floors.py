"""Where a worker's claims start: from a queue's head while that is fast; from the last window's head
after a slow read, with a read from the head at a bounded interval (and an alarm for a drained queue)."""

import datetime
import uuid

from jobs.queue import services
from jobs.queue.worker.floors import FULL_READ_SHARE, MIN_FULL_READ_SEC, ClaimFloors
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.jobs.conftest import enqueue, running_worker, wait_for_status


def place(n: int) -> services.ClaimFloor:
    return services.ClaimFloor(100, datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC), uuid.UUID(int=n))


def test_claims_read_from_the_head_while_that_is_fast():
    floors = ClaimFloors(claim_floor_after_sec=0.1)
    floors.claimed("q", floor=None, window_head=place(1), seconds=0.05, now=10.0)
    assert floors.floor("q", 10.0) is None and floors.alarms.deadlines() == []


def test_after_a_slow_read_claims_start_at_the_last_windows_head_until_the_next_read_from_the_head():
    floors = ClaimFloors(claim_floor_after_sec=0.1)
    floors.claimed("q", floor=None, window_head=place(1), seconds=0.2, now=10.0)
    full_read_at = 10.0 + 0.2 / FULL_READ_SHARE  # 4 s: the reads from the head take 5% of the time
    assert floors.alarms.deadlines() == [full_read_at]  # a drained queue is woken for it
    assert floors.floor("q", 10.0) == place(1) and floors.floor("other", 10.0) is None

    floors.claimed("q", floor=place(1), window_head=place(5), seconds=0.001, now=11.0)
    assert floors.floor("q", 11.0) == place(5)
    floors.claimed("q", floor=place(5), window_head=None, seconds=0.001, now=12.0)  # nothing after it available
    assert floors.floor("q", 12.0) == place(5)

    assert floors.floor("q", full_read_at) is None  # time for a read from the head
    assert floors.alarms.due(full_read_at) == ["q"] and floors.alarms.due(full_read_at) == []
    floors.claimed("q", floor=None, window_head=place(2), seconds=0.001, now=full_read_at)  # fast again
    assert floors.floor("q", full_read_at) is None


def test_a_slow_read_that_found_nothing_sets_no_floor_and_no_alarm():
    floors = ClaimFloors(claim_floor_after_sec=0.1)
    floors.claimed("limited", floor=None, window_head=None, seconds=0.5, now=10.0)  # a limited claim reports none
    assert floors.floor("limited", 10.0) is None and floors.alarms.deadlines() == []


def test_reads_from_the_head_are_never_closer_than_the_minimum():
    floors = ClaimFloors(claim_floor_after_sec=0.0)
    floors.claimed("q", floor=None, window_head=place(1), seconds=0.001, now=10.0)
    assert floors.alarms.deadlines() == [10.0 + MIN_FULL_READ_SEC]


@ALL_DATABASES_COMMITTED
def test_a_job_queued_behind_a_workers_floor_is_claimed_by_its_next_read_from_the_head():
    first = enqueue(task="test.echo", priority=100)
    with running_worker(claim_floor_after_sec=0.0):  # every read from the head counts as slow
        wait_for_status(first.job_id, "succeeded", timeout=5)  # the worker's floor is at ``first``
        ahead = enqueue(task="test.echo", priority=0)  # before the floor: its NOTIFY's claim misses it
        wait_for_status(ahead.job_id, "succeeded", timeout=MIN_FULL_READ_SEC + 4)  # not the 60-s sweep
