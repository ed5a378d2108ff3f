import threading
import time

from django.conf import settings
from django.core.management.base import BaseCommand

from jobs.runtime.build import build_reaper
from jobs.runtime.config import WorkerConfig
from jobs.runtime.stopping import stopping_on_signals
from pipeline_project.db.connections import interrupt_connection_wait


class Command(BaseCommand):
    help = (
        "Run every app's housekeeping periodic tasks (jobs.runtime.registry): expired leases back to the "
        "queue, silent workers forgotten, old jobs pruned, ingestion runs settled, zombie process tasks "
        "collected, ... runworker does this too unless started with --no-reaper; each task runs once per "
        "period across all processes. Tasks local to a worker's host (the database-state engine's) stay "
        "with the workers that serve it."
    )

    def handle(self, *args, **options):
        config = WorkerConfig.from_settings({})
        runner = build_reaper(config)
        stop = threading.Event()
        tasks_thread = threading.get_ident()

        def request_stop() -> float:
            stop.set()
            interrupt_connection_wait(tasks_thread)  # a task waiting for a database that is gone ends now
            return time.monotonic() + config.shutdown_timeout_sec

        with stopping_on_signals(request_stop):
            runner.run_until(stop, alive_file=settings.REAPER_ALIVE_FILE)
