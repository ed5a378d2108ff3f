import signal
import threading

from django.core.management.base import BaseCommand

from jobs.runtime.build import build_reaper
from jobs.runtime.config import WorkerConfig


class Command(BaseCommand):
    help = (
        "Run every app's housekeeping periodic tasks (jobs.runtime.registry): expired leases back to the "
        "queue, silent workers forgotten, old jobs pruned, ingestion runs settled, zombie process tasks "
        "collected, ... runworker does this too unless started with --no-reaper; each task runs once per "
        "period across all processes. Tasks local to a worker's host (the database-state engine's) stay "
        "with the workers that serve it."
    )

    def handle(self, *args, **options):
        runner = build_reaper(WorkerConfig.from_settings({}))
        stop = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
        runner.run_until(stop)
