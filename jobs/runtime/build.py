"""Building the processes: a runworker (the runtime with its sources and periodic tasks) and a
runreaper (periodic tasks alone), both from ``jobs.runtime.registry``."""

import functools
import logging
import uuid

from jobs.runtime import registry
from jobs.runtime.config import WorkerConfig
from jobs.runtime.database import configure_session
from jobs.runtime.loop import Runtime, listener_connect
from jobs.runtime.names import process_name, worker_name, worker_session_key
from jobs.runtime.periodic import PeriodicRunner

log = logging.getLogger("jobs.runtime")


def build_worker(config: WorkerConfig, handlers) -> Runtime:
    """The runworker process: the runtime serving what ``config`` says, side by side, with the
    periodic tasks of its role. Raises ``StartRefused`` when this host may not serve it, and
    ``LookupError`` for a kind of source or a namespace nobody registered."""
    worker_id = uuid.uuid4()
    setup = registry.WorkerSetup(config=config, handlers=handlers, worker_id=worker_id, name=worker_name(worker_id))
    served = registry.served_in_order(config.serves)
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
        connect_listener=functools.partial(listener_connect, session_key=worker_session_key(worker_id)),
    )


def build_reaper(config: WorkerConfig) -> PeriodicRunner:
    """The runreaper process: every housekeeping task, for workers started with --no-reaper."""
    tasks = registry.periodic_for(config, served={}, housekeeping=True)
    return periodic_runner(tasks, runner_name=process_name("reaper"))


def periodic_runner(tasks, *, runner_name: str) -> PeriodicRunner:
    log.info("periodic tasks", extra={"runner": runner_name, "tasks": [task.name for task in tasks]})
    return PeriodicRunner(tasks, runner_name=runner_name, run_once=registry.ledger())
