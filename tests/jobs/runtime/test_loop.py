"""The runtime's control loop against a fake work source: no database."""

import threading
import time

import psycopg

from jobs.runtime import loop
from jobs.runtime.loop import FINISH_SEC
from tests.jobs.runtime.fakes import FakeListener, FakeSource, OperationalError, Running, make_runtime, wait_until


def test_runs_every_claimed_item_and_stops_when_asked():
    source = FakeSource(concurrency=2)
    source.add(*range(10))

    with Running(make_runtime(source)):
        wait_until(lambda: len(source.outcomes) == 10)

    assert sorted(source.outcomes) == list(range(10))
    assert source.lane.executing == 0
    assert source.finished_with == [(False, 0)]  # a clean stop: nothing left to release


def test_every_run_ends_with_an_outcome_even_on_base_exceptions():
    def raises(exc):
        def run():
            raise exc

        return run

    source = FakeSource(concurrency=1)  # one slot: a lost slot would strand the last item
    source.add(raises(SystemExit(3)), raises(KeyboardInterrupt()), raises(ValueError("x")), "after")

    with Running(make_runtime(source)):
        wait_until(lambda: len(source.outcomes) == 4)

    assert source.outcomes == [
        "crashed: SystemExit",
        "crashed: KeyboardInterrupt",
        "crashed: ValueError",
        "after",
    ]


def test_stop_waits_for_running_work_then_releases_what_outlasts_the_timeout():
    release = threading.Event()
    source = FakeSource(concurrency=2)
    source.add(lambda: release.wait(10) and "slow")
    runtime = make_runtime(source, shutdown_timeout_sec=0.3)
    thread = threading.Thread(target=runtime.run, daemon=True)
    thread.start()
    wait_until(lambda: source.in_flight() == 1)

    started = time.monotonic()
    runtime.request_stop()
    thread.join(5)
    release.set()

    assert not thread.is_alive()
    assert 0.3 - min(FINISH_SEC, 0.3 / 4) <= time.monotonic() - started < 2  # a quarter kept for the last writes
    assert source.finished_with == [(True, 1)]


def test_no_new_work_is_claimed_once_stopping():
    gate = threading.Event()
    source = FakeSource(concurrency=1)
    source.add(lambda: gate.wait(5) and "first", "second")
    runtime = make_runtime(source)
    thread = threading.Thread(target=runtime.run, daemon=True)
    thread.start()
    wait_until(lambda: source.in_flight() == 1)

    runtime.request_stop()
    gate.set()
    thread.join(5)

    assert source.outcomes == ["first"]
    assert len(source.backlog) == 1


def test_notifications_go_to_the_source_listening_on_their_channel():
    listener = FakeListener()
    first, second = FakeSource(channels=("one",)), FakeSource(channels=("two",))

    with Running(make_runtime(first, second, listener=listener)):
        wait_until(lambda: listener.listening == ["one", "two"])
        listener.notify("two", "hello")
        listener.notify("one", "world")
        listener.notify("nobody", "lost")
        wait_until(lambda: first.notifications and second.notifications)

    assert first.notifications == [("one", "world")]
    assert second.notifications == [("two", "hello")]


def test_the_loop_sleeps_until_the_nearest_deadline_without_polling():
    source = FakeSource()

    with Running(make_runtime(source)):
        wait_until(lambda: source.steps >= 1)
        steps_before = source.steps
        due = source.wake_at = time.monotonic() + 0.3
        source.runtime.wake()
        wait_until(lambda: "timer" in source.outcomes, timeout=2)
        late = time.monotonic() - due

    assert late < 0.15  # at its deadline, not at a poll or the sweep (83 ms late once, 4 test processes on 2 cores)
    # woken once to learn the deadline, once when it came: a handful of passes, not a busy loop
    assert source.steps - steps_before <= 4


def test_a_wake_from_another_thread_ends_the_wait_at_once():
    source = FakeSource(concurrency=1)

    with Running(make_runtime(source)):
        wait_until(lambda: source.steps >= 1)
        time.sleep(0.05)  # asleep now, with nothing due for a minute (the sweep)
        started = time.monotonic()
        source.add("now")
        wait_until(lambda: source.outcomes == ["now"])
        assert time.monotonic() - started < 0.1


def test_a_database_error_backs_off_reconnects_and_looks_everywhere_again():
    source = FakeSource()
    source.step_errors.append(OperationalError("the server closed the connection"))
    runtime = make_runtime(source)

    with Running(runtime):
        wait_until(lambda: len(runtime.listeners) == 2, timeout=3)  # a new listener after the backoff
        source.add("after")
        wait_until(lambda: source.outcomes == ["after"])

    assert runtime.listeners[0].closed
    assert source.rechecks == 2  # each new listener: notifications may have been missed


def test_the_sweep_rechecks_every_source():
    source = FakeSource()

    with Running(make_runtime(source, sweep_sec=0.1)):
        wait_until(lambda: source.rechecks >= 3, timeout=2)


def test_a_listener_left_on_a_server_that_no_longer_takes_writes_is_made_again(monkeypatch):
    monkeypatch.setattr(loop, "LISTENER_CHECK_SEC", 0.05)
    source = FakeSource()
    runtime = make_runtime(source)

    with Running(runtime):
        wait_until(lambda: len(runtime.listeners) == 1)
        runtime.listeners[0].parameters[b"default_transaction_read_only"] = b"on"  # fenced before a switchover
        wait_until(lambda: len(runtime.listeners) == 2, timeout=3)
        source.add("after")
        wait_until(lambda: source.outcomes == ["after"])

    assert runtime.listeners[0].closed
    assert runtime.listeners[1].listening == runtime.listeners[0].listening


def test_a_refused_statement_is_logged_as_an_error_with_its_traceback(caplog):
    source = FakeSource()
    source.step_errors.append(psycopg.errors.SyntaxError("syntax error at or near claimed"))

    with Running(make_runtime(source)):
        wait_until(lambda: any(record.levelname == "ERROR" for record in caplog.records))

    [record] = [record for record in caplog.records if record.levelname == "ERROR"]
    assert record.getMessage() == "a database statement failed; retrying" and record.exc_info
