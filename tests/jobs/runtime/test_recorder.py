"""The batch recorder: batches, keeps what it could not write, retries; no database."""

from collections import deque

import psycopg

from jobs.runtime.recorder import Recorder
from tests.jobs.runtime.fakes import wait_until


class Store:
    def __init__(self, failures=()):
        self.batches: list[list] = []
        self.failures = deque(failures)  # how many items to write before each failure
        self.recorded: list = []

    def write(self, batch, recorded):
        written = []
        for item in batch:
            if self.failures and len(written) == self.failures[0]:
                self.failures.popleft()
                self.batches.append(written)
                raise psycopg.OperationalError("the server closed the connection")
            written.append(item)
            recorded.append((item, "ok"))
        self.batches.append(written)

    def on_recorded(self, recorded):
        self.recorded.extend(recorded)


def test_items_submitted_together_are_written_in_one_batch():
    store = Store()
    recorder = Recorder(name="test-recorder", write=store.write, on_recorded=store.on_recorded, linger_sec=0.0)
    recorder.submit(["a", "b", "c"])

    recorder.flush()

    assert store.batches == [["a", "b", "c"]]
    assert store.recorded == [("a", "ok"), ("b", "ok"), ("c", "ok")]


def test_a_failed_write_keeps_the_unwritten_items_and_the_thread_retries_them():
    store = Store(failures=[1])  # the first write stops after one item
    recorder = Recorder(name="test-recorder", write=store.write, on_recorded=store.on_recorded, linger_sec=0.0)
    recorder.start()
    recorder.submit(["a", "b", "c"])

    wait_until(lambda: len(store.recorded) == 3, timeout=5)
    recorder.stop()

    assert store.batches == [["a"], ["b", "c"]]
    assert [item for item, _status in store.recorded] == ["a", "b", "c"]  # each written once, in order
