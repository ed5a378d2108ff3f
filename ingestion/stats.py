"""A run's ``stats_json`` (seed section 8), kept current by statement-level triggers on
``ingestion_items``: each statement adds what it changed (+1 per new state, −1 per old one)
to ``ingestion_run_counts`` and rebuilds the touched runs' stats from those few rows."""

# The statuses counted per stage, besides its total (the seed's shape).
STATS_SHAPE = {
    "discovery": ("completed", "failed"),
    "documents": ("completed", "failed", "skipped"),
    "ocr": ("completed", "failed", "review_required"),
}


def empty_stats() -> dict:
    return {stage: {"total": 0, **dict.fromkeys(statuses, 0)} for stage, statuses in STATS_SHAPE.items()}


def _stats_sql() -> str:
    """jsonb_build_object(...) of one run's ``ingestion_run_counts`` rows (aliased ``c``)."""

    def count(stage: str, status: str | None = None) -> str:
        where = f"c.stage = '{stage}'" + (f" AND c.status = '{status}'" if status else "")
        return f"coalesce(sum(c.items) FILTER (WHERE {where}), 0)"

    stages = ", ".join(
        f"'{stage}', jsonb_build_object('total', {count(stage)}, "
        + ", ".join(f"'{status}', {count(stage, status)}" for status in statuses)
        + ")"
        for stage, statuses in STATS_SHAPE.items()
    )
    return f"jsonb_build_object({stages}, 'updated_at', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'))"


def stats_trigger_sql(operation: str) -> str:
    """The PL/pgSQL of the AFTER ``operation`` statement trigger (INSERT, UPDATE or DELETE)."""
    changes = []
    if operation in ("INSERT", "UPDATE"):
        changes.append("SELECT run_id, stage, status, 1 AS n FROM new_values")
    if operation in ("UPDATE", "DELETE"):
        changes.append("SELECT run_id, stage, status, -1 AS n FROM old_values")
    delta = (
        f"SELECT run_id, stage, status, sum(n)::int AS n FROM ({' UNION ALL '.join(changes)}) AS changes "
        "GROUP BY run_id, stage, status HAVING sum(n) <> 0"
    )
    if operation == "DELETE":  # the counts exist (or went with their run): never recreate them
        apply = (
            f"UPDATE ingestion_run_counts c SET items = c.items + d.n FROM ({delta}) AS d "
            "WHERE c.run_id = d.run_id AND c.stage = d.stage AND c.status = d.status;"
        )
    else:  # in key order, so that concurrent statements lock count rows in the same order
        apply = (
            f"INSERT INTO ingestion_run_counts (run_id, stage, status, items) "
            f"SELECT run_id, stage, status, n FROM ({delta}) AS d ORDER BY run_id, stage, status "
            "ON CONFLICT (run_id, stage, status) DO UPDATE SET items = ingestion_run_counts.items + excluded.items;"
        )
    refresh = (
        f"UPDATE ingestion_runs r SET stats_json = s.stats, updated_at = now() "
        f"FROM (SELECT c.run_id, {_stats_sql()} AS stats FROM ingestion_run_counts c "
        f"WHERE c.run_id IN (SELECT run_id FROM ({delta}) AS d) GROUP BY c.run_id) AS s "
        "WHERE r.id = s.run_id;"
    )
    return f"{apply} {refresh} RETURN NULL;"
