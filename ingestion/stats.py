"""The triggers that keep ingestion's rules in the database, whoever writes:

- ``ingestion_runs``: every write sets ``updated_at = now()`` (seed section 9), and a write that
  changes ``stats_json`` (or creates the run) stamps its ``updated_at`` (section 8).
- ``ingestion_items``: no statement may write an item of a canceled run other than as
  ``canceled`` (the run rows are locked first, so a cancel committing meanwhile is seen); and
  the run's ``stats_json`` is kept current: each statement adds what it changed
  (+1 per new state, −1 per old one) to ``ingestion_run_counts`` (stamping when its count first
  and last changed: the run page's timeline) and rebuilds the touched runs' stats from those few rows.
"""

# The statuses counted per stage, besides its total (the seed's shape).
STATS_SHAPE = {
    "discovery": ("completed", "failed"),
    "documents": ("completed", "failed", "skipped"),
    "ocr": ("completed", "failed", "review_required"),
}
# Section 8's timestamp, e.g. "2026-02-25T13:00:00Z".
NOW_TEXT = "to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"
CANCELED_RUN_SQLSTATE = "IR001"  # a write to a canceled run (ingestion.services.RunCanceled)


def empty_stats() -> dict:
    """A new run's stats (its ``updated_at`` is stamped by the runs' trigger)."""
    return {stage: {"total": 0, **dict.fromkeys(statuses, 0)} for stage, statuses in STATS_SHAPE.items()}


RUN_TOUCH_SQL = f"""
NEW.updated_at := now();
IF TG_OP = 'INSERT' OR NEW.stats_json IS DISTINCT FROM OLD.stats_json THEN
    NEW.stats_json := coalesce(NEW.stats_json, '{{}}'::jsonb) || jsonb_build_object('updated_at', {NOW_TEXT});
END IF;
RETURN NEW;
"""


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
    return f"jsonb_build_object({stages})"


def _canceled_guard() -> str:
    """Lock the statement's runs (in id order, as every writer does), then refuse any item of a
    canceled run that is not canceled: nothing a late writer sends may revive a canceled run."""
    return (
        "PERFORM 1 FROM ingestion_runs WHERE id IN (SELECT run_id FROM new_values) ORDER BY id FOR NO KEY UPDATE; "
        "SELECT n.run_id INTO canceled_run FROM new_values n JOIN ingestion_runs r ON r.id = n.run_id "
        "WHERE r.status = 'canceled' AND n.status <> 'canceled' LIMIT 1; "
        "IF canceled_run IS NOT NULL THEN "
        f"RAISE EXCEPTION 'ingestion run % was canceled', canceled_run USING ERRCODE = '{CANCELED_RUN_SQLSTATE}'; "
        "END IF;"
    )


def items_trigger_sql(operation: str) -> str:
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
        guard = ""
        apply = (
            f"UPDATE ingestion_run_counts c SET items = c.items + d.n, changed_at = now() FROM ({delta}) AS d "
            "WHERE c.run_id = d.run_id AND c.stage = d.stage AND c.status = d.status;"
        )
    else:  # in key order, so that concurrent statements lock count rows in the same order
        guard = _canceled_guard()
        apply = (
            f"INSERT INTO ingestion_run_counts (run_id, stage, status, items) "
            f"SELECT run_id, stage, status, n FROM ({delta}) AS d ORDER BY run_id, stage, status "
            "ON CONFLICT (run_id, stage, status) "
            "DO UPDATE SET items = ingestion_run_counts.items + excluded.items, changed_at = now();"
        )
    refresh = (
        f"UPDATE ingestion_runs r SET stats_json = s.stats "
        f"FROM (SELECT c.run_id, {_stats_sql()} AS stats FROM ingestion_run_counts c "
        f"WHERE c.run_id IN (SELECT run_id FROM ({delta}) AS d) GROUP BY c.run_id) AS s "
        "WHERE r.id = s.run_id;"
    )
    return f"{guard} {apply} {refresh} RETURN NULL;"
