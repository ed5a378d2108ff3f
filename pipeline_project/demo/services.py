"""``demo_install`` and ``demo_remove``: the demo made and taken away through each system's own
services, idempotently. Everything the demo makes is named ``demo`` something (config), so a
second install finds it and makes nothing, and remove deletes exactly it and nothing else."""

import shutil
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction

from ingestion import services as ingestion_services
from ingestion.models import ENDED_RUN_STATUSES, HostSlot, IngestionRun, RobotsTxt, Source, SourcePace
from jobs.dbstates.engine.steps import PrepareRequest
from jobs.dbstates.models import Instance, PrepareJob, State
from jobs.dbstates.services import prepare_jobs
from jobs.dbstates.services.deletions import instance_delete, prepare_job_delete, state_delete
from jobs.processes import services as process_services
from jobs.processes.models import Process
from jobs.queue.selectors import jobs_with_args
from jobs.queue.services import Selection, jobs_delete
from jobs.schedules import services as schedule_services
from jobs.schedules.models import Schedule
from pipeline_project.api.errors import InvalidInputError
from pipeline_project.demo import config, jobs, tracking

BY = "demo"
PROCESS_ARGS = {
    "demo-order-1": {"item": "water meter", "every_sec": 10},
    "demo-order-2": {"item": "pipe fittings", "every_sec": 30},
    "demo-order-broken": {"item": "nothing", "fail": True},
}


@dataclass
class Outcome:
    """What an install or a removal did, by system (the command prints it)."""

    counts: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def base_url_check(base_url: str) -> str:
    """``http(s)://host[:port]`` without a trailing slash, or a 400."""
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path.strip("/"):
        raise InvalidInputError(f"base URL must be http(s)://host[:port], not {base_url!r}", code="invalid_base_url")
    return f"{parts.scheme}://{parts.netloc}"


def demo_install(*, base_url: str = config.DEFAULT_BASE_URL) -> Outcome:
    """Make what is missing of the demo: the source and its first run, the jobs, the schedule,
    the processes, the tracked files and the prepared database state. What is there is left as
    it is (a run, a job or a process moves on under the workers; a second install makes nothing)."""
    start_url = f"{base_url_check(base_url)}{config.SITE_PATH}index.html"
    outcome = Outcome()
    with transaction.atomic():
        outcome.counts["source"], outcome.counts["run"] = _ingestion_install(start_url)
        outcome.counts["jobs"] = jobs.jobs_install()
        outcome.counts["schedule"] = _schedule_install()
        outcome.counts["processes"] = _processes_install()
        outcome.counts["database state"] = _state_install(outcome.notes)
    with transaction.atomic(using="pipeline"):
        outcome.counts["tracked rows"] = tracking.tracking_install()
    return outcome


def demo_remove() -> Outcome:
    """Delete everything the demo made, and nothing else; running work is stopped first."""
    outcome = Outcome()
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
    source, created = Source.objects.get_or_create(
        name=config.SOURCE_NAME,
        defaults={"start_url": start_url, "crawl_delay_sec": 0.2, "max_concurrent_per_host": 2, "max_documents": 20},
    )
    if source.start_url != start_url:
        Source.objects.filter(id=source.id).update(start_url=start_url)
    if IngestionRun.objects.filter(source=source).exists():
        return int(created), 0
    ingestion_services.run_start(source_id=source.id, manual=False)
    return int(created), 1


def _ingestion_remove() -> int:
    """The demo source, its runs (stopped first), their items, jobs and downloaded files, and
    what politeness kept for its host when no other source fetches from it."""
    source = Source.objects.filter(name=config.SOURCE_NAME).first()
    if source is None:
        return 0
    runs = list(IngestionRun.objects.filter(source=source).values_list("id", "status"))
    for run_id, status in runs:
        if status not in ENDED_RUN_STATUSES:
            ingestion_services.run_cancel(run_id=run_id, by=BY)
        jobs_delete(selection=Selection.of_queryset(jobs_with_args(values={"run_id": str(run_id)})), force=True)
    IngestionRun.objects.filter(source=source).delete()  # items and stage counts go with them
    SourcePace.objects.filter(source=source).delete()
    origin = f"{urlsplit(source.start_url).scheme}://{urlsplit(source.start_url).netloc}"
    source.delete()
    if not any(s.start_url.startswith(origin) for s in Source.objects.only("start_url")):
        RobotsTxt.objects.filter(origin=origin).delete()
        HostSlot.objects.filter(host=urlsplit(origin).netloc, holder__isnull=True).delete()
    paths = [settings.INGESTION_STORAGE_DIR / str(run_id) for run_id, _status in runs]
    transaction.on_commit(lambda: [shutil.rmtree(path, ignore_errors=True) for path in paths])
    return len(runs)


def _schedule_install() -> int:
    """Every 10 s the schedule enqueues ``demo.tracking-tick``, which moves the tracked files on."""
    if Schedule.objects.filter(name=config.SCHEDULE_NAME).exists():
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
    schedule = Schedule.objects.filter(name=config.SCHEDULE_NAME).first()
    if schedule is None:
        return 0
    schedule_services.schedule_delete(schedule_id=schedule.id)
    return 1


def _processes_install() -> int:
    """The demo's processes, each with its init task waiting for the namespace's worker (not
    waited for here: ``demo`` returns whether a worker runs or not)."""
    existing = set(Process.objects.filter(namespace=config.NAMESPACE).values_list("process_id", flat=True))
    missing = [process_id for process_id in config.PROCESS_IDS if process_id not in existing]
    for process_id in missing:
        request = process_services.TaskRequest(
            args=PROCESS_ARGS[process_id], idempotency_key=f"{config.IDEMPOTENCY_PREFIX}init:{process_id}"
        )
        process_services.process_init_prepare(namespace=config.NAMESPACE, process_id=process_id, request=request)
    return len(missing)


def _processes_remove() -> int:
    """The namespace's processes with their tasks, schedule, running rows and events (cascade)."""
    processes = Process.objects.filter(namespace=config.NAMESPACE)
    count = processes.count()
    processes.delete()
    return count


def _demo_prepare_jobs():
    return PrepareJob.objects.filter(request__stdin=config.STATE_SQL)


def _state_install(notes: list[str]) -> int:
    """A prepare job on the engine's queue (psql on the newest local PostgreSQL, the script on
    stdin); the sqlrs worker builds the state and starts an instance of it."""
    if _demo_prepare_jobs().exists():
        return 0
    request = PrepareRequest(
        prepare_kind="psql", image_id=config.STATE_IMAGE, psql_args=["-f", "-"], stdin=config.STATE_SQL
    )
    try:
        with transaction.atomic():
            prepare_jobs.prepare_job_submit(request=request)
    except InvalidInputError as exc:  # no PostgreSQL installation on this machine to prepare with
        notes.append(f"database state skipped: {exc}")
        return 0
    return 1


def _state_remove() -> int:
    """The demo's prepare jobs, their instances and the states only they built (their script is
    the demo's, so no other job's state has their content hash), and their queue jobs."""
    removed = 0
    for job in list(_demo_prepare_jobs()):
        for instance_id in Instance.objects.filter(job=job).values_list("instance_id", flat=True):
            instance_delete(instance_id=instance_id, force=True)
        built = [state for state in job.tasks.values_list("output_state_id", flat=True) if state]
        prepare_job_delete(job_id=job.job_id, force=True)
        for state_id in reversed(built):  # children first
            if State.objects.filter(state_id=state_id).exists():
                state_delete(state_id=state_id, recurse=True, force=True)
        if job.queue_job_id:
            jobs_delete(selection=Selection.of_ids([job.queue_job_id]), force=True)
        removed += 1
    return removed
