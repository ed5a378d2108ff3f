"""Building the processes: a runworker (the runtime with its sources and periodic tasks) and a
runreaper (periodic tasks alone), both from ``jobs.runtime.registry``."""

import logging
import os
import socket
import uuid

from jobs.runtime import registry
from jobs.runtime.config import WorkerConfig
from jobs.runtime.database import configure_session
from jobs.runtime.loop import Runtime
from jobs.runtime.periodic import PeriodicRunner

log = logging.getLogger("jobs.runtime")


def build_worker(config: WorkerConfig, handlers) -> Runtime:
    """The runworker process: the runtime serving what ``config`` says, side by side, with the
    periodic tasks of its role. Raises ``StartRefused`` when this host may not serve it, and
    ``LookupError`` for a kind of source or a namespace nobody registered."""
    worker_id = uuid.uuid4()
    setup = registry.WorkerSetup(config=config, handlers=handlers, worker_id=worker_id, name=worker_name(worker_id))
    served = {kind: dict(names) for kind, names in config.serves.items() if names}
    classes = {kind: registry.source_class(kind) for kind in served}
    registry.check_start(served)
    registry.run_start_hooks(handlers)
    sources = [classes[kind].build(names, setup) for kind, names in served.items()]
    tasks = registry.periodic_for(config, served=served, housekeeping=config.run_reaper)
    return Runtime(
        sources,
        session=lambda: configure_session(config.synchronous_commit),
        sweep_sec=config.sweep_sec,
        shutdown_timeout_sec=config.shutdown_timeout_sec,
        periodic=periodic_runner(tasks, runner_name=setup.name) if tasks else None,
    )


def build_reaper(config: WorkerConfig) -> PeriodicRunner:
    """The runreaper process: every housekeeping task, for workers started with --no-reaper."""
    tasks = registry.periodic_for(config, served={}, housekeeping=True)
    return periodic_runner(tasks, runner_name=f"{socket.gethostname()}:{os.getpid()}:reaper")


def periodic_runner(tasks, *, runner_name: str) -> PeriodicRunner:
    log.info("periodic tasks", extra={"runner": runner_name, "tasks": [task.name for task in tasks]})
    return PeriodicRunner(tasks, runner_name=runner_name)


def worker_name(worker_id: uuid.UUID) -> str:
    """How a worker process names itself in leases, events and logs: host, pid, id prefix."""
    return f"{socket.gethostname()}:{os.getpid()}:{str(worker_id)[:8]}"
