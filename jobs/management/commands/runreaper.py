import signal
import threading
import time

from django.core.management.base import BaseCommand
from django.db import DatabaseError, connection

from jobs.worker import Reaper, WorkerConfig


class Command(BaseCommand):
    help = (
        "Return expired leases to the queue every DL_REAPER_PERIOD_SEC and prune old jobs. "
        "runworker does this too unless started with --no-reaper; only one reaper acts at a time."
    )

    def handle(self, *args, **options):
        reaper = Reaper(WorkerConfig.from_settings({}))
        stop = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
        while not stop.is_set():
            stop.wait(self._run_once(reaper))

    def _run_once(self, reaper: Reaper) -> float:
        """Do what is due; return how long to sleep."""
        try:
            return max(0.0, reaper.run_due() - time.monotonic())
        except DatabaseError as exc:
            self.stderr.write(f"database unavailable, retrying: {str(exc).strip()[:200]}")
            connection.close()
            return 1.0
