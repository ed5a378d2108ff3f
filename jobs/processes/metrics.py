"""The seed's progressor histograms, in milliseconds, with progressor's buckets and labels (not its
notification histogram: nothing here sends the notifications it times)."""

from prometheus_client import Histogram

BUCKETS = (50, 150, 300, 500, 750, 1000)

CALLS_SCANNING = Histogram(
    "progressor_calls_scanning_duration_ms",
    "Calls (call, repair) scanning durations in millisecond",
    ["namespace"],
    buckets=BUCKETS,
)
TIMERS_SCANNING = Histogram(
    "progressor_timers_scanning_duration_ms",
    "Timers (timeout, remove) scanning durations in millisecond",
    ["namespace"],
    buckets=BUCKETS,
)
ZOMBIE_COLLECTION = Histogram(
    "progressor_zombie_collection_duration_ms",
    "Zombie tasks collecting durations in millisecond",
    ["namespace"],
    buckets=BUCKETS,
)
REQUEST_PREPARING = Histogram(
    "progressor_request_preparing_duration_ms",
    "Preparing request (init, call, repair) durations in millisecond",
    ["namespace", "task_type"],
    buckets=BUCKETS,
)
TASK_PROCESSING = Histogram(
    "progressor_task_processing_duration_ms",
    "Task processing durations in millisecond",
    ["namespace", "task_type"],
    buckets=BUCKETS,
)
TASK_COMPLETION = Histogram(
    "progressor_task_completion_duration_ms",
    "Task completion durations in millisecond",
    ["namespace", "completion_type"],
    buckets=BUCKETS,
)
PROCESS_REMOVING = Histogram(
    "progressor_process_removing_duration_ms",
    "Task completion durations in millisecond",
    ["namespace"],
    buckets=BUCKETS,
)
