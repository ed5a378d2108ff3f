"""The runtime's connection settings and database-error helpers, shared by every work source."""

import psycopg
from django.conf import settings
from django.db import DatabaseError, connection

from pipeline_project.db.connections import session_set
from pipeline_project.db.storable import first_line

DATABASE_ERRORS = (DatabaseError, psycopg.Error)


def retry_delay(failures: int) -> float:
    """Seconds before the next try after ``failures`` database errors in a row: doubling from 0.2 s
    to 1 s. While the database refuses connections the pool says so at once, so a try costs little,
    and work resumes within a second of its return."""
    return min(1.0, 0.1 * 2 ** min(failures, 5))


# The runtime's statements each have one right index walk. The planner chose others from statistics
# that describe a nearly empty table (the plans made in a new deployment's first seconds scanned
# the whole table for every claimed job) or, after an ANALYZE under a held xmin, a few live jobs
# in indexes full of entries it cannot see (probes of a key's queued jobs walked the seed's
# ``ix_dl_jobs_claim`` end to end, 18-s claims): with these off, only the indexes that reach a row
# or deliver a statement's order serve it. Measured in bench/chaos.py (the manual, operating/faults.md).
PLANNER_STEERING = {"enable_seqscan": "off", "enable_sort": "off"}


def configure_session(synchronous_commit: str) -> None:
    """Session settings for the runtime's own statements on this thread's (pooled) connection:
    generic plans (:func:`use_generic_plans`), ``PLANNER_STEERING`` and ``synchronous_commit``,
    which are put back (in the one round trip of the pool's check) before the pool lends the
    connection to another thread: a handler's statements are planned as anywhere else."""
    if settings.DB_BEHIND_POOLER:
        return
    use_generic_plans()
    session_set(connection.connection, {**PLANNER_STEERING, "synchronous_commit": synchronous_commit}, restore=True)


def use_generic_plans() -> None:
    """Plan the runtime's statements once per connection, not at every execution.

    ``plan_cache_mode``: with an unknown LIMIT the generic plan of a claim or a completion
    looks costly, so PostgreSQL would plan every execution anew (most of the statement's
    time); the generic plan is in fact the same index walk. ``jit``: that same cost estimate
    grows with the table and, on servers built with JIT, would make PostgreSQL compile the
    statement on every execution. Both only choose plans, so they stay on the connection for
    its next borrowers (a handler's prepared statements get generic plans too).
    Behind a transaction pooler a session setting would leak to other clients, so there the
    database role should carry these settings instead (see the manual: operating/pgbouncer.md).
    """
    if settings.DB_BEHIND_POOLER:
        return
    connection.ensure_connection()
    session_set(connection.connection, {"plan_cache_mode": "force_generic_plan", "jit": "off"}, restore=False)


def error_extra(exc: BaseException, **extra) -> dict:
    """Log extras for a database error."""
    return {"error": first_line(exc), **{key: str(value) for key, value in extra.items()}}


def session_lock_take(conn, key: int) -> None:
    """Take ``key``'s session-level advisory lock on ``conn``, held until the session ends."""
    conn.execute("SELECT pg_advisory_lock(%s)", [key])
