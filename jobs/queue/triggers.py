"""The PL/pgSQL of the queue tables' statement triggers (declared in ``jobs.queue.models``).

``dl_jobs_notify_ins`` / ``dl_jobs_notify_upd``: the seed's ``notify_job_ready`` rules, one NOTIFY
per queue per statement, then (UPDATE) the dependency rules and (both) the job counts and the
finished jobs' throughput.
``dl_job_events_notify``: the ids of jobs with new events, for followers of their streams.
A change to the text these return needs a migration (``makemigrations`` finds it).
"""

from jobs.queue import throughput
from jobs.queue.dependency_rules import REACT_CALL
from jobs.queue.states import QUEUED_SQL
from pipeline_project.db.counts import RowCounts

EVENTS_NOTIFY_IDS = 200  # 200 ids of 36 characters stay under NOTIFY's 8,000-byte payload limit


def notify_ready_sql(compare_with_old: bool, *, channel: str, counts: RowCounts) -> str:
    """One NOTIFY per queue per statement, with the seed trigger's rules.

    INSERT: every inserted row's queue. UPDATE: rows that are queued and available now and
    whose status or available_at changed. (A job that became claimable because the running
    job of its lock_key ended is announced by the statement that ended it: see
    ``services.jobs_complete``.)
    """
    if compare_with_old:
        rows = (
            "new_values n JOIN old_values o ON o.job_id = n.job_id "
            f"WHERE n.status = {QUEUED_SQL} AND n.available_at <= now() "
            "AND (o.status IS DISTINCT FROM n.status OR o.available_at IS DISTINCT FROM n.available_at)"
        )
    else:
        rows = "new_values n"
    # UPDATE: then what jobs waiting for the changed ones do (``jobs.queue.dependency_rules``).
    react = REACT_CALL if compare_with_old else ""
    # And the counts (``JOB_COUNTS``) and the finished jobs (``jobs.queue.throughput``), in this
    # trigger: a second one costs a call per statement.
    append_counts = counts.append_sql(new=True, old=compare_with_old)
    append_finished = throughput.append_sql(compare_with_old)
    return (
        f"PERFORM pg_notify('{channel}', queue) FROM (SELECT DISTINCT n.queue FROM {rows}) AS ready; "
        f"{react}{append_counts} {append_finished} RETURN NULL;"
    )


def notify_events_sql(*, channel: str) -> str:
    """One NOTIFY per statement (per EVENTS_NOTIFY_IDS jobs) naming the jobs that got events:
    followers of a job's event stream wake on it instead of polling."""
    return (
        f"PERFORM pg_notify('{channel}', string_agg(job_id::text, ',')) "
        f"FROM (SELECT job_id, (row_number() OVER () - 1) / {EVENTS_NOTIFY_IDS} AS chunk "
        "FROM (SELECT DISTINCT job_id FROM new_values) AS jobs) AS numbered GROUP BY chunk; RETURN NULL;"
    )
