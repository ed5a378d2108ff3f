"""The demo's jobs on its queues: some succeed, some fail (at once, or when their attempts run
out), one fails twice and then succeeds, and some wait for others (one until tomorrow's export
runs, in an hour; one is canceled when its upstream fails; one runs anyway)."""

from dataclasses import replace
from datetime import timedelta

from django.utils import timezone

from jobs.queue import selectors, services
from jobs.queue.services import JobSpec
from pipeline_project.demo.config import IDEMPOTENCY_PREFIX, PRODUCER, QUEUES

ETL, REPORTS = QUEUES


def _spec(key: str, queue: str, task: str, args: dict, **fields) -> JobSpec:
    """A demo job: its idempotency key and lock key are its name, so a second install finds it."""
    name = f"{IDEMPOTENCY_PREFIX}{key}"
    return JobSpec(queue=queue, task=task, lock_key=name, args=args, idempotency_key=name, producer=PRODUCER, **fields)


def _upstream_specs() -> dict[str, JobSpec]:
    later = timezone.now() + timedelta(hours=1)
    return {
        "extract-customers": _spec("extract-customers", ETL, "demo.work", {"table": "customers", "seconds": 3}),
        "extract-orders": _spec("extract-orders", ETL, "demo.work", {"table": "orders", "seconds": 5}),
        "extract-meters": _spec("extract-meters", ETL, "demo.work", {"table": "meters", "seconds": 2}),
        "billing-api": _spec("billing-api", ETL, "demo.flaky", {"succeed_on_attempt": 3}, max_attempts=5),
        "legacy-ftp": _spec("legacy-ftp", ETL, "demo.broken", {"source": "legacy-ftp"}, max_attempts=3),
        "corrupt-file": _spec("corrupt-file", ETL, "demo.broken", {"file": "corrupt.csv", "fatal": True}),
        "nightly-export": _spec("nightly-export", ETL, "demo.work", {"export": "nightly"}, available_at=later),
    }


# Each dependent job: its spec's fields and the upstream jobs (by key) it waits for.
DEPENDENTS = {
    "load-warehouse": (
        REPORTS,
        {"step": "load", "seconds": 3},
        ("extract-customers", "extract-orders", "extract-meters"),
    ),
    "monthly-report": (REPORTS, {"report": "monthly", "seconds": 2}, ("load-warehouse", "billing-api")),
    "reconcile-legacy": (REPORTS, {"step": "reconcile"}, ("legacy-ftp",)),
    "cleanup-staging": (REPORTS, {"step": "cleanup"}, ("legacy-ftp", "corrupt-file")),
    "publish-export": (REPORTS, {"step": "publish"}, ("nightly-export",)),
}
RUN_ANYWAY = {"cleanup-staging"}  # runs once its upstream jobs ended, whatever their end


def demo_job_keys() -> list[str]:
    return [f"{IDEMPOTENCY_PREFIX}{key}" for key in [*_upstream_specs(), *DEPENDENTS]]


def jobs_install() -> int:
    """Enqueue the demo's jobs that are not there yet (by idempotency key); how many were made."""
    if selectors.job_list().filter(idempotency_key__in=demo_job_keys()).count() == len(demo_job_keys()):
        return 0  # all there: not even an idempotent insert
    created = 0
    ids: dict[str, object] = {}
    upstream = _upstream_specs()
    for key, enqueued in zip(upstream, services.job_enqueue_many(specs=list(upstream.values())), strict=True):
        ids[key], created = enqueued.job_id, created + enqueued.created
    for key, (queue, args, waits_for) in DEPENDENTS.items():  # in order: each names earlier ones
        spec = _spec(key, queue, "demo.work", args, run_anyway=key in RUN_ANYWAY)
        enqueued = services.job_enqueue(spec=replace(spec, depends_on=[ids[name] for name in waits_for]))
        ids[key], created = enqueued.job_id, created + enqueued.created
    return created


def jobs_remove() -> int:
    """Delete every job of the demo's queues (the schedule's ticks are there too), running or not,
    with their journals and dependencies, and the queues' operator state."""
    return services.queues_delete(queues=QUEUES)
