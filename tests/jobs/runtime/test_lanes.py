"""Lanes: slots, threads, and an outcome for every run whatever it raises; no database."""

import threading
import time
from collections import deque

from jobs.runtime.lanes import Lane
from tests.jobs.runtime.fakes import wait_until


def make_lane(concurrency=2, execute=None, report=None):
    reported = deque()

    def default_report(run, outcome):
        reported.append((run, outcome))

    lane = Lane(
        "test",
        concurrency,
        execute=execute or (lambda run: run * 10),
        crashed=lambda run, exc: f"crashed: {type(exc).__name__}",
        report=report or default_report,
        thread_prefix="test-lane",
    )
    lane.start()
    return lane, reported


def test_slots_are_taken_and_freed_by_the_control_thread():
    lane, reported = make_lane(concurrency=3)
    lane.submit(1)
    lane.submit(2)

    assert (lane.executing, lane.free, lane.freed_at) == (2, 1, None)
    wait_until(lambda: len(reported) == 2)
    lane.release()
    assert (lane.executing, lane.free) == (1, 2) and lane.freed_at is not None
    lane.stop()

    assert sorted(reported) == [(1, 10), (2, 20)]


def test_whatever_a_run_raises_it_still_reports_an_outcome():
    def execute(run):
        raise run

    lane, reported = make_lane(concurrency=1, execute=execute)
    for exc in (SystemExit(1), KeyboardInterrupt(), GeneratorExit(), RuntimeError("bug")):
        lane.submit(exc)
    wait_until(lambda: len(reported) == 4)
    lane.stop()

    assert [outcome for _run, outcome in reported] == [
        "crashed: SystemExit",
        "crashed: KeyboardInterrupt",
        "crashed: GeneratorExit",
        "crashed: RuntimeError",
    ]


def test_a_report_may_hand_the_slot_on_to_the_next_run_on_the_same_thread():
    threads, outcomes = [], []

    def report(run, outcome):
        threads.append(threading.current_thread().name)
        outcomes.append(outcome)
        return run + 1 if run < 3 else None

    lane, _reported = make_lane(concurrency=4, report=report)
    lane.submit(1)
    wait_until(lambda: len(outcomes) == 3)
    lane.stop()

    assert outcomes == [10, 20, 30]
    assert len(set(threads)) == 1


def test_runs_that_block_each_get_a_thread_of_their_own():
    # A submitted run wakes one thread, which wakes the next when more wait: all four still run at once.
    together = threading.Barrier(4, timeout=10)

    def execute(run):
        together.wait()
        return run

    lane, reported = make_lane(concurrency=4, execute=execute)
    for run in range(4):
        lane.submit(run)
    wait_until(lambda: len(reported) == 4)
    lane.stop()

    assert sorted(reported) == [(0, 0), (1, 1), (2, 2), (3, 3)]


def test_a_lane_tells_how_long_its_short_runs_take():
    release = threading.Event()

    def execute(run):
        if run == "long":
            release.wait(10)
        return run

    lane, reported = make_lane(concurrency=1, execute=execute)
    assert lane.short_run_sec(1.0, time.monotonic()) is None  # it has run nothing

    for run in range(5):
        lane.submit(run)
    wait_until(lambda: len(reported) == 5)
    assert 0 <= lane.short_run_sec(1.0, time.monotonic()) < 0.1  # short runs, the last just now
    assert lane.short_run_sec(1.0, time.monotonic() + 2) is None  # none ended in the last second

    lane.submit("long")  # its only thread held: no run ends, whatever the runs before took
    time.sleep(0.4)
    assert lane.short_run_sec(0.2, time.monotonic()) is None
    release.set()
    wait_until(lambda: len(reported) == 6)
    lane.stop()
    # The long run weighs in the average (a tenth of the 0.4 s it was held, less its start): no longer under 0.02 s.
    assert lane.short_run_sec(0.02, time.monotonic()) is None
    assert lane.short_run_sec(1.0, time.monotonic()) >= 0.03
