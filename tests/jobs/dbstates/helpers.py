"""Helpers for the database-state tests: a state store of the test session, prepares run to their end."""

import time

import jobs.dbstates.job_handlers  # noqa: F401  (registers sqlrs.prepare)
from jobs.dbstates import postgres, services, statefs
from jobs.dbstates.models import PrepareEvent, PrepareJob
from jobs.worker import WorkerConfig
from tests.jobs.helpers import FAST, worker_in_thread

IMAGE = "postgres:15"


def engine_worker(concurrency: int = 2):
    """The runworker runtime serving the engine's queue, in a thread."""
    return worker_in_thread(WorkerConfig.from_settings({"sqlrs": concurrency}, **FAST))


def wait_terminal(job_id: str, timeout: float = 60.0) -> PrepareJob:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = PrepareJob.objects.get(job_id=job_id)
        if job.is_terminal:
            return job
        time.sleep(0.02)
    raise AssertionError(f"prepare job {job_id} did not end within {timeout}s (status {job.status})")


def prepare(script_or_args, *, stdin=None, plan_only=False, image=IMAGE) -> PrepareJob:
    args = script_or_args if isinstance(script_or_args, list) else ["-f", str(script_or_args)]
    return services.prepare_job_submit(
        prepare_kind="psql", image_id=image, psql_args=args, stdin=stdin, plan_only=plan_only
    )


def servers_stop() -> None:
    """Stop every server the engine left in the store (instances and job runtimes)."""
    root = statefs.root()
    for parent in (root / "instances", root / "jobs"):
        if parent.exists():
            for pid_file in parent.glob("**/postmaster.pid"):
                postgres.stop(pid_file.parent, immediate=True)


def script(directory, name: str, sql: str):
    path = directory / name
    path.write_text(sql)
    return path


def prepared(script_or_args, **kwargs) -> PrepareJob:
    """A prepare run to its end by an engine worker; asserts it succeeded."""
    with engine_worker():
        job = wait_terminal(prepare(script_or_args, **kwargs).job_id)
    assert job.status == "succeeded", job.error
    return job


def task_events(job_id: str) -> list[tuple[str, str]]:
    return list(
        PrepareEvent.objects.filter(job_id=job_id, type="task").order_by("seq").values_list("task_id", "status")
    )
