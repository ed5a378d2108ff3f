"""Finished jobs per queue, status and minute, kept in ``dl_job_throughput``: a chart of a week reads
at most a row per queue, status and hour (quarter hour within the last two days, minute within
the last 90 minutes), however many jobs finished.

dl_jobs' statement triggers append them (:func:`append_sql`, in the statement that ends the jobs):
for each job whose finished_at became set (by INSERT, or by UPDATE from NULL), one in its queue,
status and minute. Nothing is taken back: not by a retry (finished_at back to NULL: the run ended,
the next end counts again), not by deleting jobs (history outlives them: retention prunes jobs
sooner), not by an UPDATE of a job already finished (no service rewrites an end). Claims,
heartbeats and retries leave finished_at NULL: their statements find no set one to join.

Appended, never updated: two writers never wait on a row. :func:`fold` sums each minute's appended
rows into one (``folded``); :func:`age` sums older rows into coarser buckets (:data:`COARSENING`)
and drops rows older than the retention. A reader sums whatever rows a bucket has: a fold, one
statement, shows it the rows before or after, never both, so its sums are exact meanwhile.
"""

from datetime import datetime, timedelta

from pipeline_project.db import sql
from pipeline_project.db.connections import apart_from_this_transaction

TABLE = "dl_job_throughput"
# Rows get coarser with age: minutes for 90 minutes (the hour window's and the aging period's),
# then quarter hours for two days (the day window's), then hours. A window reads at most a row per
# queue, status and its bucket, plus the finer rows of its last 90 minutes.
COARSENING = ((timedelta(minutes=15), timedelta(minutes=90)), (timedelta(hours=1), timedelta(days=2)))
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

# Each bucket of ``step`` before ``kept`` ago that still holds a finer row, its rows summed into one
# at the bucket's start (rows older than the retention left to the drop: no row is both). One read
# of the range, deleting by row address: no join of buckets to rows to misplan.
_COARSEN = f"""
    WITH bounds AS (
        SELECT date_bin(%(step)s, now() - %(kept)s, {ORIGIN_SQL}) AS coarse_before,
               now() - %(retention_days)s * INTERVAL '1 day' AS dropped_before
    ),
    ranged AS (
        SELECT t.ctid AS row_address,
               bool_or(t.minute <> b.bucket) OVER (PARTITION BY t.queue, t.status, b.bucket) AS finer
        FROM {TABLE} t CROSS JOIN bounds
        CROSS JOIN LATERAL (SELECT date_bin(%(step)s, t.minute, {ORIGIN_SQL}) AS bucket) AS b
        WHERE t.minute < bounds.coarse_before AND t.minute >= bounds.dropped_before
    ),
    summed AS (
        DELETE FROM {TABLE} t WHERE t.ctid = ANY (ARRAY(SELECT row_address FROM ranged WHERE finer))
        RETURNING t.queue, t.status, t.n, date_bin(%(step)s, t.minute, {ORIGIN_SQL}) AS bucket
    ),
    kept AS (
        INSERT INTO {TABLE} (queue, status, minute, n, folded)
        SELECT queue, status, bucket, sum(n), true FROM summed GROUP BY 1, 2, 3 HAVING sum(n) <> 0
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM summed), (SELECT count(*) FROM kept)
"""
_DROP = f"""
    WITH dropped AS (DELETE FROM {TABLE} WHERE minute < now() - %(retention_days)s * INTERVAL '1 day' RETURNING 1)
    SELECT count(*) FROM dropped
"""


def fold() -> dict:
    """Sum each minute's appended rows into one; then vacuum the table, whose folded rows die
    (VACUUM runs apart from any transaction; SKIP_LOCKED: one already running will do)."""
    [(before, after)] = sql.rows(_FOLD, {})
    if before:
        _vacuum()
    return {"folded": before - after}


def age(*, retention_days: float) -> dict:
    """Sum the rows of each bucket past its age (``COARSENING``) into one, drop the rows older than
    ``retention_days``."""
    folded = 0
    for step, kept in COARSENING:
        [(before, after)] = sql.rows(_COARSEN, {"step": step, "kept": kept, "retention_days": retention_days})
        folded += before - after
    [(dropped,)] = sql.rows(_DROP, {"retention_days": retention_days})
    if folded or dropped:
        _vacuum()
    return {"folded": folded, "dropped": dropped}


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
