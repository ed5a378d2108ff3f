"""The engine's periodic tasks, the check that keeps its queue on its host, and the stop of the
servers a worker started when it exits (``jobs.runtime.registry``).

The cache's eviction, the sweep of deleted jobs' directories and the markers' sync work on the
state store: they are local to the engine's host, and run in the workers serving its queue there
(with or without ``--no-reaper``). The reconciliation of prepare jobs whose queue job ended
without them reads and writes the database only: housekeeping, run anywhere.

A runworker process stops the servers it started (instances its prepares made, servers a released
job left) after its drain, before it exits: a fast shutdown each, within the stop's time
(``servers.started_servers_stop``).
"""

from django.conf import settings

from jobs.dbstates import cache, services
from jobs.dbstates.engine import placement, servers, statefs
from jobs.dbstates.engine.executor import job_dirs_sweep
from jobs.runtime.periodic import PeriodicWork
from jobs.runtime.registry import at_exit, periodic_tasks, start_check

start_check(placement.serving_check)
at_exit(servers.started_servers_stop)


@periodic_tasks
def engine_tasks(config) -> list[PeriodicWork]:
    engine = ("queue", settings.SQLRS_QUEUE)
    return [
        PeriodicWork(
            "sqlrs.cache_evict",
            settings.SQLRS_CACHE_EVICT_PERIOD_SEC,
            lambda: cache.cache_evict(trigger="periodic"),
            local_to=engine,
        ),
        PeriodicWork("sqlrs.jobs_reconcile", settings.SQLRS_RECONCILE_PERIOD_SEC, services.prepare_jobs_reconcile),
        PeriodicWork("sqlrs.job_dirs_sweep", settings.SQLRS_RECONCILE_PERIOD_SEC, job_dirs_sweep, local_to=engine),
        # States a dead worker built but did not sync: durable before the machine can restart.
        PeriodicWork(
            "sqlrs.states_sync",
            settings.SQLRS_RECONCILE_PERIOD_SEC,
            lambda: {"marked_durable": statefs.markers_make_durable()},
            local_to=engine,
        ),
    ]
