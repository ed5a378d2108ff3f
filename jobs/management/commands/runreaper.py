import os
import signal
import socket
import threading

from django.core.management.base import BaseCommand

from jobs.periodic import queue_tasks
from jobs.runtime.periodic import PeriodicRunner
from jobs.worker import WorkerConfig


class Command(BaseCommand):
    help = (
        "Run the queue's periodic tasks: expired leases back to the queue every DL_REAPER_PERIOD_SEC, "
        "silent workers forgotten, old jobs pruned. runworker does this too unless started with "
        "--no-reaper; each task runs once per period across all processes."
    )

    def handle(self, *args, **options):
        runner = PeriodicRunner(
            queue_tasks(WorkerConfig.from_settings({})), runner_name=f"{socket.gethostname()}:{os.getpid()}:reaper"
        )
        stop = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
        runner.run_until(stop)
