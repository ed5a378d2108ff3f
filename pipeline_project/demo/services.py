"""``demo_install`` and ``demo_remove``: the demo made and taken away through each system's own
services, idempotently. Everything the demo makes is named ``demo`` something (config), so a
second install finds it and makes nothing, and remove deletes exactly it and nothing else."""

from dataclasses import dataclass, field
from urllib.parse import urlsplit

from django.db import transaction

from ingestion import services as ingestion_services
from jobs.dbstates import selectors as state_selectors
from jobs.dbstates import services as state_services
from jobs.processes import selectors as process_selectors
from jobs.processes import services as process_services
from jobs.schedules import selectors as schedule_selectors
from jobs.schedules import services as schedule_services
from pipeline_project.api.errors import InvalidInputError
from pipeline_project.demo import config, jobs, tracking

BY = "demo"
PROCESS_ARGS = {
    "demo-order-1": {"item": "water meter", "every_sec": 10},
    "demo-order-2": {"item": "pipe fittings", "every_sec": 30},
    "demo-order-broken": {"item": "nothing", "fail": True},
}


@dataclass
class DemoReport:
    """What an install or a removal did, by system (the command prints it)."""

    counts: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def base_url_check(base_url: str) -> str:
    """``http(s)://host[:port]`` without a trailing slash, or a 400."""
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path.strip("/"):
        raise InvalidInputError(f"base URL must be http(s)://host[:port], not {base_url!r}", code="invalid_base_url")
    return f"{parts.scheme}://{parts.netloc}"


def demo_install(*, base_url: str = config.DEFAULT_BASE_URL) -> DemoReport:
    """Make what is missing of the demo: the source and its first run, the jobs, the schedule,
    the processes, the tracked files and the prepared database state. What is there is left as
    it is (a run, a job or a process moves on under the workers; a second install makes nothing)."""
    start_url = f"{base_url_check(base_url)}{config.SITE_PATH}index.html"
    outcome = DemoReport()
    with transaction.atomic():
        outcome.counts["source"], outcome.counts["run"] = _ingestion_install(start_url)
        outcome.counts["jobs"] = jobs.jobs_install()
        outcome.counts["schedule"] = _schedule_install()
        outcome.counts["processes"] = _processes_install()
        outcome.counts["database state"] = _state_install(outcome.notes)
    with transaction.atomic(using="pipeline"):
        outcome.counts["tracked rows"] = tracking.tracking_install()
    return outcome


def demo_remove() -> DemoReport:
    """Delete everything the demo made, and nothing else; running work is stopped first."""
    outcome = DemoReport()
    with transaction.atomic():
        outcome.counts["runs"] = _ingestion_remove()
        outcome.counts["jobs"] = jobs.jobs_remove()
        outcome.counts["schedule"] = _schedule_remove()
        outcome.counts["processes"] = _processes_remove()
        outcome.counts["database state jobs"] = _state_remove()
    with transaction.atomic(using="pipeline"):
        outcome.counts["tracked rows"] = tracking.tracking_remove()
    return outcome


def _ingestion_install(start_url: str) -> tuple[int, int]:
    """The demo source (its start URL moved to ``start_url`` if it changed) and, if it never
    ran, a run of it: discover → download → OCR on the service's own demo site."""
    created, started = ingestion_services.source_ensure(
        name=config.SOURCE_NAME,
        start_url=start_url,
        first_run=True,
        crawl_delay_sec=0.2,
        max_concurrent_per_host=2,
        max_documents=20,
    )
    return int(created), int(started)


def _ingestion_remove() -> int:
    """The demo source, its runs (stopped first), their items, jobs and downloaded files, and
    what politeness kept for its host when no other source fetches from it."""
    return ingestion_services.source_delete(name=config.SOURCE_NAME, by=BY)


def _schedule_install() -> int:
    """Every 10 s the schedule enqueues ``demo.tracking-tick``, which moves the tracked files on."""
    if schedule_selectors.schedule_by_name(name=config.SCHEDULE_NAME) is not None:
        return 0
    values = {
        "name": config.SCHEDULE_NAME,
        "task": "demo.tracking-tick",
        "queue": config.QUEUES[0],
        "interval_sec": config.SCHEDULE_INTERVAL_SEC,
    }
    schedule_services.schedule_create(values=values, by=BY)
    return 1


def _schedule_remove() -> int:
    schedule = schedule_selectors.schedule_by_name(name=config.SCHEDULE_NAME)
    if schedule is None:
        return 0
    schedule_services.schedule_delete(schedule_id=schedule.id)
    return 1


def _processes_install() -> int:
    """The demo's processes, each with its init task waiting for the namespace's worker (not
    waited for here: ``demo`` returns whether a worker runs or not)."""
    existing = process_selectors.process_ids(namespace=config.NAMESPACE)
    missing = [process_id for process_id in config.PROCESS_IDS if process_id not in existing]
    for process_id in missing:
        request = process_services.TaskRequest(
            args=PROCESS_ARGS[process_id], idempotency_key=f"{config.IDEMPOTENCY_PREFIX}init:{process_id}"
        )
        process_services.process_init_prepare(namespace=config.NAMESPACE, process_id=process_id, request=request)
    return len(missing)


def _processes_remove() -> int:
    """The namespace's processes with their tasks, schedule, running rows and events (cascade)."""
    return process_services.processes_delete(namespace=config.NAMESPACE)


def _state_install(notes: list[str]) -> int:
    """A prepare job on the engine's queue (psql on the newest local PostgreSQL, the script on
    stdin); the sqlrs worker builds the state and starts an instance of it."""
    if state_selectors.prepare_job_ids_with_stdin(stdin=config.STATE_SQL):
        return 0
    request = state_services.PrepareRequest(
        prepare_kind="psql", image_id=config.STATE_IMAGE, psql_args=["-f", "-"], stdin=config.STATE_SQL
    )
    try:
        with transaction.atomic():
            state_services.prepare_job_submit(request=request)
    except InvalidInputError as exc:  # no PostgreSQL installation on this machine to prepare with
        notes.append(f"database state skipped: {exc}")
        return 0
    return 1


def _state_remove() -> int:
    """The demo's prepare jobs, their instances and the states only they built (their script is
    the demo's, so no other job's state has their content hash), and their queue jobs."""
    job_ids = state_selectors.prepare_job_ids_with_stdin(stdin=config.STATE_SQL)
    for job_id in job_ids:
        state_services.prepare_job_purge(job_id=job_id)
    return len(job_ids)
