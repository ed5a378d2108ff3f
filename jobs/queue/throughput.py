"""Finished jobs per queue, status and minute, kept in ``dl_job_throughput``: a chart of a week reads
at most a row per queue, status and minute (hour, past two days), however many jobs finished.

dl_jobs' statement triggers append them (:func:`append_sql`, in the statement that ends the jobs):
for each job whose finished_at became set (by INSERT, or by UPDATE from NULL), one in its queue,
status and minute. Nothing is taken back: not by a retry (finished_at back to NULL: the run ended,
the next end counts again), not by deleting jobs (history outlives them: retention prunes jobs
sooner), not by an UPDATE of a job already finished (no service rewrites an end). Claims,
heartbeats and retries leave finished_at NULL: their statements find no set one to join.

Appended, never updated: two writers never wait on a row. :func:`fold` sums each minute's appended
rows into one (``folded``); :func:`age` sums minutes older than :data:`MINUTES_KEPT` into their
hour and drops rows older than the retention. A reader sums whatever rows a bucket has: a fold, one
statement, shows it the rows before or after, never both, so its sums are exact meanwhile.
"""

from datetime import datetime, timedelta

from pipeline_project.db import sql
from pipeline_project.db.connections import apart_from_this_transaction

TABLE = "dl_job_throughput"
MINUTES_KEPT = timedelta(days=2)  # then an hour's minutes become one row
# Buckets are measured from this moment (date_bin: immutable, the same in every time zone).
ORIGIN_SQL = "TIMESTAMPTZ '2000-01-01 00:00:00+00'"


def _minute(column: str) -> str:
    return f"date_bin(INTERVAL '1 minute', {column}, {ORIGIN_SQL})"


def append_sql(compare_with_old: bool) -> str:
    """The statement dl_jobs' INSERT (``compare_with_old`` false) or UPDATE trigger runs to count
    the jobs it ended. The UPDATE's takes the rows whose finished_at is set before it joins the old
    ones: a claim's or a heartbeat's statement finds none and joins nothing (measured: a result
    statement of 16 jobs spends 16 µs more in its trigger, a claim's nothing measurable)."""
    insert = f"INSERT INTO {TABLE} (queue, status, minute, n) "
    if not compare_with_old:
        return (
            f"{insert}SELECT queue, status, {_minute('finished_at')}, count(*) FROM new_values "
            "WHERE finished_at IS NOT NULL GROUP BY 1, 2, 3;"
        )
    return (
        f"{insert}SELECT n.queue, n.status, {_minute('n.finished_at')}, count(*) "
        "FROM (SELECT * FROM new_values WHERE finished_at IS NOT NULL) AS n JOIN old_values o ON o.job_id = n.job_id "
        "WHERE o.finished_at IS NULL GROUP BY 1, 2, 3;"
    )


# Each bucket with appended rows (the partial index of those), all its rows summed into one.
_FOLD = f"""
    WITH touched AS (SELECT DISTINCT queue, status, minute FROM {TABLE} WHERE NOT folded),
    summed AS (
        DELETE FROM {TABLE} t USING touched
        WHERE t.minute = touched.minute AND t.queue = touched.queue AND t.status = touched.status
        RETURNING t.queue, t.status, t.minute, t.n
    ),
    kept AS (
        INSERT INTO {TABLE} (queue, status, minute, n, folded)
        SELECT queue, status, minute, sum(n), true FROM summed GROUP BY 1, 2, 3 HAVING sum(n) <> 0
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM summed), (SELECT count(*) FROM kept)
"""

# The hours before the last MINUTES_KEPT that still hold a minute's row, each summed into one row at
# the hour's start; and the rows older than the retention dropped (apart: no row is both).
_AGE = f"""
    WITH bounds AS (
        SELECT date_bin(INTERVAL '1 hour', now() - %(minutes_kept)s, {ORIGIN_SQL}) AS hours_before,
               now() - %(retention_days)s * INTERVAL '1 day' AS dropped_before
    ),
    hours AS (
        SELECT DISTINCT t.queue, t.status, date_bin(INTERVAL '1 hour', t.minute, {ORIGIN_SQL}) AS hour
        FROM {TABLE} t, bounds
        WHERE t.minute < bounds.hours_before AND t.minute >= bounds.dropped_before
          AND t.minute <> date_bin(INTERVAL '1 hour', t.minute, {ORIGIN_SQL})
    ),
    summed AS (
        DELETE FROM {TABLE} t USING hours, bounds
        WHERE t.minute >= hours.hour AND t.minute < hours.hour + INTERVAL '1 hour'
          AND t.minute >= bounds.dropped_before AND t.queue = hours.queue AND t.status = hours.status
        RETURNING t.queue, t.status, t.n, hours.hour
    ),
    kept AS (
        INSERT INTO {TABLE} (queue, status, minute, n, folded)
        SELECT queue, status, hour, sum(n), true FROM summed GROUP BY 1, 2, 3 HAVING sum(n) <> 0
        RETURNING 1
    ),
    dropped AS (
        DELETE FROM {TABLE} t USING bounds WHERE t.minute < bounds.dropped_before RETURNING 1
    )
    SELECT (SELECT count(*) FROM summed), (SELECT count(*) FROM kept), (SELECT count(*) FROM dropped)
"""


def fold() -> dict:
    """Sum each minute's appended rows into one; then vacuum the table, whose folded rows die
    (VACUUM runs apart from any transaction; SKIP_LOCKED: one already running will do)."""
    [(before, after)] = sql.rows(_FOLD, {})
    if before:
        _vacuum()
    return {"folded": before - after}


def age(*, retention_days: float) -> dict:
    """Sum the minutes older than MINUTES_KEPT into their hours, drop the rows older than
    ``retention_days``."""
    [(before, after, dropped)] = sql.rows(_AGE, {"minutes_kept": MINUTES_KEPT, "retention_days": retention_days})
    if before or dropped:
        _vacuum()
    return {"folded": before - after, "dropped": dropped}


def _vacuum() -> None:
    apart_from_this_transaction(lambda: sql.execute(f"VACUUM (SKIP_LOCKED, TRUNCATE false) {TABLE}", {}))


def finished(*, since: datetime, step: timedelta, origin: datetime) -> list[tuple[str, str, datetime, int]]:
    """``(queue, status, bucket, jobs)``: the jobs that finished from ``since`` on, per bucket of
    ``step`` (counted from ``origin``), read by the index on minute."""
    return sql.rows(
        f"""
        SELECT queue, status::text, date_bin(%(step)s, minute, %(origin)s) AS bucket, sum(n)::bigint
        FROM {TABLE} WHERE minute >= %(since)s
        GROUP BY 1, 2, 3 HAVING sum(n) <> 0
        """,
        {"since": since, "step": step, "origin": origin},
    )
