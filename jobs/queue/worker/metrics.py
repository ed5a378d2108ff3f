"""Prometheus metrics of the job queue.

Counters and the histogram are per process (runworker serves its own on --metrics-port);
with PROMETHEUS_MULTIPROC_DIR set, /metrics sums every process on the host. Queue depth, the
jobs claimable now (what KEDA scales the workers on) and live workers are read from the database
at scrape time by :class:`QueueDepthCollector`.
"""

import functools

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily

from jobs.queue.states import JobStatus

CLAIMED = Counter("dl_jobs_claimed_total", "Jobs claimed by this worker.", ["queue"])
SUCCEEDED = Counter("dl_jobs_succeeded_total", "Jobs that succeeded.", ["queue", "task"])
FAILED = Counter(
    "dl_jobs_failed_total", "Jobs that failed for good (attempts spent or unknown task).", ["queue", "task"]
)
RETRIED = Counter("dl_jobs_retried_total", "Failed runs put back in the queue for another attempt.", ["queue", "task"])
CANCELED = Counter("dl_jobs_canceled_total", "Running jobs stopped by cancellation.", ["queue", "task"])
LEASE_LOST = Counter(
    "dl_jobs_lease_lost_total", "Runs whose result was dropped because the lease was lost.", ["queue", "task"]
)
REAPED = Counter("dl_jobs_reaped_total", "Expired leases handled by the reaper.", ["outcome"])
CLAIM_RACES = Counter(
    "dl_jobs_claim_races_total",
    "Claims that lost a race for a lock_key to another worker (nothing written; claimed again).",
    ["queue"],
)
SET_ASIDE = Counter("dl_jobs_set_aside_total", "Jobs failed because the database refused to claim them.", ["queue"])
PROCESSING = Histogram(
    "dl_job_processing_seconds",
    "Time from claim to recorded outcome.",
    ["queue", "task"],
    buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 1800),
)
RUNNING = Gauge("dl_worker_running_jobs", "Jobs running in this worker.", ["queue"], multiprocess_mode="livesum")

_BY_STATUS = {
    JobStatus.SUCCEEDED: SUCCEEDED,
    JobStatus.FAILED: FAILED,
    JobStatus.QUEUED: RETRIED,
    JobStatus.CANCELED: CANCELED,
    None: LEASE_LOST,
}


@functools.cache
def _outcome_children(queue: str, task: str, status: str | None):
    # labels() costs a lock and a lookup; a worker records thousands of outcomes a second.
    return _BY_STATUS[status].labels(queue=queue, task=task), PROCESSING.labels(queue=queue, task=task)


class QueueMeters:
    """A worker's per-queue metric children, looked up once: labels() is not free at thousands of
    jobs a second (the control thread's: ``jobs.queue.worker.source``)."""

    def __init__(self, queues):
        self.claimed = {queue: CLAIMED.labels(queue=queue) for queue in queues}
        self.running = {queue: RUNNING.labels(queue=queue) for queue in queues}


def record_outcome(*, queue: str, task: str, status: str | None, seconds: float) -> None:
    counter, histogram = _outcome_children(queue, task, status)
    counter.inc()
    histogram.observe(seconds)


CLAIMABLE_HELP = (
    "Jobs of the queue that claims could take now (the KEDA scaling signal): queued and due (not delayed,"
    " backing off or waiting for other jobs), each the first queued job of its lock_key, whose key no"
    " running job holds. Capped by the queue's limits: min(due jobs, free max_running/rate_limit slots),"
    " per partition for per-partition limits. 0 while the queue is paused. Counted among the queue's first"
    " {window} due jobs."
)


class QueueDepthCollector:
    """``dl_queue_depth{queue, status}``, ``dl_queue_claimable_jobs{queue}`` and live workers, read
    when /metrics is scraped."""

    def collect(self):
        from jobs.queue import selectors

        depth = GaugeMetricFamily("dl_queue_depth", "Jobs in dl_jobs by queue and status.", labels=["queue", "status"])
        for queue, statuses in selectors.queue_depths().items():
            for status, count in statuses.items():
                depth.add_metric([queue, status], count)
        yield depth
        claimable = GaugeMetricFamily(
            "dl_queue_claimable_jobs", CLAIMABLE_HELP.format(window=selectors.CLAIMABLE_WINDOW), labels=["queue"]
        )
        for queue, count in sorted(selectors.claimable_depths().items()):
            claimable.add_metric([queue], count)
        yield claimable
        workers = GaugeMetricFamily("dl_live_workers", "runworker processes that heartbeated recently.")
        workers.add_metric([], len(selectors.live_workers()))
        yield workers
