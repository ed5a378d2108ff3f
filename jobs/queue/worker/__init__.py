"""The job queue's worker: what ``runworker`` runs for WORKERS_JSON entries ``{"queue": NAME}``.

Importing it registers, with the runtime (``jobs.runtime.registry``), the queue's kind of work
(:mod:`source`, its clocks in :mod:`clocks`), its housekeeping (:mod:`housekeeping`), the ledger
that runs every app's periodic tasks once per period (``dl_periodic_tasks``), and the
``--handlers`` option that loads task handlers.
"""

from jobs.queue import services
from jobs.queue.handlers import load_handler_modules
from jobs.queue.worker import housekeeping, source  # noqa: F401 - they register the queue's work
from jobs.runtime.registry import modules_option, periodic_ledger

periodic_ledger(services.periodic_task_run)
modules_option("handlers", help="Extra handler module to import.")(load_handler_modules)
