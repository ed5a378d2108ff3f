"""Helpers shared by the demo's tests: the rows of every table the demo touches."""

from django.db import connections

# Every table demo_install writes (directly or through the systems' services and triggers).
CONTROL_TABLES = (
    "ingestion_sources",
    "ingestion_runs",
    "ingestion_items",
    "ingestion_run_counts",
    "dl_jobs",
    "dl_job_events",
    "dl_job_dependencies",
    "dl_job_counts",
    "dl_schedules",
    "dl_processes",
    "dl_process_counts",
    "dl_proc_tasks",
    "dl_proc_schedule",
    "dl_proc_events",
    "sqlrs_prepare_jobs",
    "sqlrs_events",
)
PIPELINE_TABLES = ("pipeline_tracking", "pipeline_tracking_counts", "pipeline_tracking_history")


def row_counts() -> dict[str, int]:
    """Rows of each table the demo touches, in both databases."""
    counts = {}
    for alias, tables in (("default", CONTROL_TABLES), ("pipeline", PIPELINE_TABLES)):
        with connections[alias].cursor() as cursor:
            for table in tables:
                cursor.execute(f"SELECT count(*) FROM {table}")
                counts[table] = cursor.fetchone()[0]
    return counts
