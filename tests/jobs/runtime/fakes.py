"""A work source and a LISTEN connection made of plain Python, to drive the runtime without a database."""

import os
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from types import SimpleNamespace

import psycopg

from jobs.runtime.lanes import Lane
from jobs.runtime.loop import Runtime


@dataclass
class Notify:
    channel: str
    payload: str


class FakeListener:
    """What the runtime uses of a psycopg connection: a file descriptor to select on, LISTEN, notifies."""

    def __init__(self):
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        self.closed = False
        self.listening: list[str] = []
        self.parameters: dict[bytes, bytes] = {}  # what its server reports (in_hot_standby, ...)
        self.pgconn = SimpleNamespace(parameter_status=self.parameters.get)
        self._queue: deque[Notify] = deque()

    def fileno(self) -> int:
        return self._read

    def execute(self, statement: str):
        if statement.startswith("LISTEN "):
            self.listening.append(statement.removeprefix("LISTEN "))
        return SimpleNamespace(fetchone=lambda: (False,))  # the listener check: not in recovery

    def notify(self, channel: str, payload: str) -> None:
        """Another connection's NOTIFY arriving."""
        self._queue.append(Notify(channel, payload))
        os.write(self._write, b"n")

    def notifies(self, timeout: float = 0):
        try:
            while os.read(self._read, 4096):
                pass
        except BlockingIOError:
            pass
        while self._queue:
            yield self._queue.popleft()

    def close(self) -> None:
        self.closed = True


@dataclass(eq=False)
class FakeRun:
    work: object  # a callable run in the lane, or a value to return
    outcome: object = None


@dataclass
class FakeSource:
    """Claims from ``backlog`` into one lane of ``concurrency`` slots; records outcomes in order."""

    concurrency: int = 2
    channels: tuple[str, ...] = ("fake",)
    backlog: deque = field(default_factory=deque)
    step_errors: deque = field(default_factory=deque)  # exceptions step() raises, one per call
    outcomes: list = field(default_factory=list)
    notifications: list = field(default_factory=list)
    rechecks: int = 0
    steps: int = 0
    finished_with: list = field(default_factory=list)
    wake_at: float | None = None  # a deadline of the source's own (a timer)

    def __post_init__(self):
        self.lane = Lane(
            "fake",
            self.concurrency,
            execute=self._execute,
            crashed=self._crashed,
            report=self._report,
            thread_prefix="fake",
        )
        self._done: deque[FakeRun] = deque()
        self._running: set[FakeRun] = set()
        self.runtime: Runtime | None = None

    def add(self, *works) -> None:
        self.backlog.extend(FakeRun(work) for work in works)
        if self.runtime is not None:
            self.runtime.wake()

    # the runtime's interface
    def start(self, runtime):
        self.runtime = runtime
        self.lane.start()

    def stop(self):
        self.lane.stop()

    def recheck(self):
        self.rechecks += 1

    def notified(self, channel, payload):
        self.notifications.append((channel, payload))

    def collect(self):
        while self._done:
            run = self._done.popleft()
            self._running.discard(run)
            self.lane.release()
            self.outcomes.append(run.outcome)

    def pending(self):
        return bool(self._done)

    def deadline(self, now, stopping):
        if not stopping and self.backlog and self.lane.free:
            return now
        return self.wake_at

    def step(self, now, stopping):
        self.steps += 1
        if self.step_errors:
            raise self.step_errors.popleft()
        if self.wake_at is not None and now >= self.wake_at:
            self.wake_at = None
            self.outcomes.append("timer")
        while not stopping and self.backlog and self.lane.free:
            run = self.backlog.popleft()
            self._running.add(run)
            self.lane.submit(run)

    def in_flight(self):
        return len(self._running)

    def finish(self, release):
        self.finished_with.append((release, len(self._running)))

    # the lane's callbacks (handler threads)
    def _execute(self, run):
        return run.work() if callable(run.work) else run.work

    def _crashed(self, run, exc):
        return f"crashed: {type(exc).__name__}"

    def _report(self, run, outcome):
        run.outcome = outcome
        self._done.append(run)
        self.runtime.wake()


def make_runtime(*sources, shutdown_timeout_sec=5.0, sweep_sec=60.0, listener=None) -> Runtime:
    listeners = []

    def connect():
        listeners.append(listener or FakeListener())
        return listeners[-1]

    runtime = Runtime(
        list(sources),
        session=lambda: None,
        sweep_sec=sweep_sec,
        shutdown_timeout_sec=shutdown_timeout_sec,
        connect_listener=connect,
    )
    runtime.listeners = listeners
    return runtime


class Running:
    """The runtime's loop on a thread; stopped (and joined) on exit."""

    def __init__(self, runtime: Runtime):
        self.runtime = runtime
        self.thread = threading.Thread(target=runtime.run, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self.runtime

    def __exit__(self, *exc):
        self.runtime.request_stop()
        self.thread.join(10)
        assert not self.thread.is_alive(), "the runtime did not stop"


def wait_until(condition, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.005)


OperationalError = psycopg.OperationalError
