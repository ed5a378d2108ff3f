"""The chaos bench's producer: a steady stream of no-op jobs through the public producer API
(``jobs.queue.services.job_enqueue_many``), as a daemon of ours would send them.

    .venv/bin/python bench/chaos_producer.py TAG CONTROL_FILE STATUS_FILE

It sends ``rate`` jobs a second (read from CONTROL_FILE, a JSON object, twice a second) in a
call every 50 ms; job n has the idempotency key ``TAG-n``. A call that fails is retried with the
same keys, as the manual tells a producer to, until it succeeds: the retry cannot make a job
twice. Its counters go to STATUS_FILE every second and when SIGTERM stops it.
"""

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import django

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pipeline_project.settings")

QUEUE = "chaos"
TICK_SEC = 0.05
MAX_BATCH = 2_000  # what a producer catching up after an outage sends at once
RETRY_PAUSE_SEC = 0.1


class Producer:
    def __init__(self, tag: str, control: Path, status: Path):
        self.tag, self.control, self.status = tag, control, status
        self.stopping = threading.Event()
        self.counters = {"offered": 0, "calls": 0, "failed_calls": 0, "errors": {}, "longest_call_sec": 0.0}
        self._rate, self._rate_read_at, self._lease_ttl_sec = 0.0, 0.0, None

    def rate(self) -> float:
        if time.monotonic() - self._rate_read_at > 0.5:
            control = json.loads(self.control.read_text())
            self._rate, self._lease_ttl_sec = control["rate"], control.get("lease_ttl_sec")
            self._rate_read_at = time.monotonic()
        return self._rate

    def run(self) -> None:
        last, owed, reported = time.monotonic(), 0.0, 0.0
        while not self.stopping.is_set():
            now = time.monotonic()
            owed, last = owed + self.rate() * (now - last), now
            count = min(int(owed), MAX_BATCH)
            if count:
                self.send(count)
                owed -= count
            if now - reported >= 1:
                self.report()
                reported = now
            self.stopping.wait(max(0.0, TICK_SEC - (time.monotonic() - now)))
        self.report()

    def send(self, count: int) -> None:
        from django.db import DatabaseError, connection

        from jobs.queue import services

        first = self.counters["offered"]
        specs = [
            services.JobSpec(
                queue=QUEUE,
                task="jobs.noop",
                args={"n": n},  # jobs alike but for their args: retention keeps only the newest 100 identical ones
                lock_key=f"{self.tag}-{n}",
                idempotency_key=f"{self.tag}-{n}",
                lease_ttl_sec=self._lease_ttl_sec,
            )
            for n in range(first, first + count)
        ]
        started = time.monotonic()
        while True:
            self.counters["calls"] += 1
            try:
                services.job_enqueue_many(specs=specs)
                break
            except DatabaseError as exc:
                self.counters["failed_calls"] += 1
                name = type(exc).__name__
                self.counters["errors"][name] = self.counters["errors"].get(name, 0) + 1
                connection.close()
                time.sleep(RETRY_PAUSE_SEC)
        self.counters["longest_call_sec"] = max(self.counters["longest_call_sec"], time.monotonic() - started)
        self.counters["offered"] = first + count

    def report(self) -> None:
        partial = self.status.with_suffix(".tmp")
        partial.write_text(json.dumps(self.counters))
        partial.replace(self.status)


def main() -> None:
    tag, control, status = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    django.setup()
    producer = Producer(tag, control, status)
    signal.signal(signal.SIGTERM, lambda *_: producer.stopping.set())
    producer.run()


if __name__ == "__main__":
    main()
