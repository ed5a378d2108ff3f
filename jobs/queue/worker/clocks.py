"""The job queue's clocks, from settings unless a worker's configuration overrides them by name."""

from jobs.runtime.config import kind_settings, setting


@kind_settings
class QueueClocks:
    heartbeat_sec: float = setting("DL_HEARTBEAT_SEC")
    retry_backoff_sec: float = setting("DL_RETRY_BACKOFF_SEC")
    claim_batch: int = setting("DL_CLAIM_BATCH")
    claim_coalesce_sec: float = setting("DL_CLAIM_COALESCE_SEC")
    claim_ahead_run_sec: float = setting("DL_CLAIM_AHEAD_RUN_SEC")
    claim_floor_after_sec: float = setting("DL_CLAIM_FLOOR_AFTER_SEC")
    record_linger_sec: float = setting("DL_RECORD_LINGER_SEC")
    progress_interval_sec: float = setting("DL_PROGRESS_INTERVAL_SEC")
    reaper_period_sec: float = setting("DL_REAPER_PERIOD_SEC")
    retention_period_sec: float = setting("DL_RETENTION_PERIOD_SEC")
    retention_age_sec: float = setting("DL_RETENTION_AGE_SEC")
    retention_max_identical: int = setting("DL_RETENTION_MAX_IDENTICAL")
