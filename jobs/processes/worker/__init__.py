"""Process namespaces' worker: what ``runworker`` runs for WORKERS_JSON entries ``{"namespace":
NAME}``. Importing it registers, with the runtime (``jobs.runtime.registry``), the namespaces'
kind of work (:mod:`source`), their housekeeping (:mod:`housekeeping`) and the ``--processors``
option that loads processors."""

from jobs.processes.namespaces import load_processor_modules
from jobs.processes.worker import housekeeping, source  # noqa: F401 - they register the namespaces' work
from jobs.runtime.registry import modules_option

modules_option("processors", help="Extra processor module to import.")(load_processor_modules)
