"""Running a prepare job under runworker (the jobCoordinator and taskExecutor of seed 1.2).

plan → resolve the image → for each step not in the cache, state_execute → prepare the
instance. A job taken again after its worker died resumes: the plan is kept, a step's
half-done runtime directory (and the server its dead worker left running) is cleared, and
states already built are reused.

state_execute: copy the input (the image's base, or the parent state) into the job's runtime
directory, start a server, run psql, CHECKPOINT and stop it cleanly, move the directory into
the state store and write the ``.build.ok`` marker last. Builds of one state are exclusive
across processes; a builder that waited finds the state built and goes on.
"""

import logging
import re
import uuid
from pathlib import Path

from django.conf import settings

from jobs.dbstates import cache, selectors, services
from jobs.dbstates.engine import images, plans, postgres, statefs, steps
from jobs.dbstates.engine.plans import Plan, PlanStep
from jobs.dbstates.models import Instance, PrepareJob, PrepareStatus
from jobs.dbstates.services import error_of
from jobs.queue.handlers import JobContext
from pipeline_project.api.errors import ApplicationError
from pipeline_project.db.storable import exception_text, failure_text

log = logging.getLogger("pipeline.dbstates")
JOB_ID = re.compile(r"^[0-9a-f]{32}$")


class PrepareFailed(Exception):
    """The prepare job fails with ``error`` (a sqlrs error: code, message, details); no retry."""

    def __init__(self, code: str, message: str, details: str = ""):
        super().__init__(message)
        self.error = failure(code, message, details)


def failure(code: str, message: str, details: str = "") -> dict:
    """A job's error, its texts as every failure's are stored (masked, storable, bounded)."""
    return error_of(code, failure_text(message), failure_text(details, tail=True))


def prepare_job_run(ctx: JobContext) -> dict:
    job_id = ctx.args["job_id"]
    job = services.job_start(job_id=job_id)
    if job is None:
        return {"status": "over"}
    stop = ctx.signals.stopped
    try:
        plan = _plan(job, stop=stop)
        if plan is None:
            return {"status": PrepareStatus.FAILED}
        if job.plan_only:
            services.job_finish(job_id=job_id, result=None)
            return {"status": PrepareStatus.SUCCEEDED}
        built = [_state_execute(job, plan, step, stop=stop) for step in plan.steps]
        result = _instance_prepare(job, plan, stop=stop)
        services.job_finish(job_id=job_id, result=result)
        if any(built):  # after the answer, off the client's path
            statefs.markers_make_durable()
            cache.cache_evict(trigger="prepare")
        return {"status": PrepareStatus.SUCCEEDED, "instance_id": result["instance_id"]}
    except PrepareFailed as exc:
        services.job_finish(job_id=job_id, error=exc.error)
        return {"status": PrepareStatus.FAILED}
    except statefs.Stopped:
        pass  # canceled, or the lease was lost: below
    except postgres.ServerError as exc:
        services.job_finish(job_id=job_id, error=failure("runtime_error", str(exc)))
        return {"status": PrepareStatus.FAILED}
    except Exception as exc:
        if ctx.attempt >= ctx.job.max_attempts:  # no worker takes it again: it ends here
            services.job_finish(job_id=job_id, error=failure("internal_error", exception_text(exc)))
        raise
    finally:
        _runtime_clear(job_id)
    if ctx.signals.canceled:
        services.job_finish(job_id=job_id, error=error_of("cancelled", "the prepare job was cancelled"))
    ctx.check_cancelled()  # lease lost: the job is left running for the worker that takes it over
    return {"status": "stopped"}


def _plan(job: PrepareJob, *, stop) -> Plan | None:
    """The job's plan: computed once and stored (a resumed job reads it back)."""
    try:
        image = images.image_resolve(job.image_id)
        request = steps.request_normalize(steps.PrepareRequest.of_job(job))
        planned = steps.steps_plan(request, image, workspace=statefs.job_dir(job.job_id) / "plan", stop=stop)
    except ApplicationError as exc:
        services.job_finish(job_id=job.job_id, error=failure(exc.code, exc.message))
        return None
    except steps.PlanFailed as exc:
        services.job_finish(job_id=job.job_id, error=failure("plan_failed", str(exc), exc.details))
        return None
    plan = plans.plan_make(job=job, image=image, request=request, planned=planned)
    if not selectors.prepare_job_planned(job_id=job.job_id):
        signature = plan.signature(plan_only=job.plan_only)
        services.job_plan_store(
            job_id=job.job_id, resolved_image_id=image.resolved_id, signature=signature, tasks=plan.tasks
        )
        services.jobs_retention_apply(signature=signature)
    return plan


def _state_execute(job: PrepareJob, plan: Plan, step: PlanStep, *, stop) -> bool:
    """Make the step's state (unless the cache has it); True if it was built here."""
    task = step.task
    state_id = task.output_state_id
    target = statefs.state_dir(plan.image.version, state_id)
    if selectors.task_succeeded(job_id=job.job_id, task_id=task.task_id):
        return False
    services.task_status_set(job_id=job.job_id, task_id=task.task_id, status=PrepareStatus.RUNNING)

    def built() -> bool:
        return statefs.is_complete(target, statefs.BUILD_MARKER) and selectors.state_exists(state_id=state_id)

    with statefs.build_lock(target, done=built, stop=stop) as must_build:
        if must_build:
            _state_invalidate(state_id, target)
            source = _input_dir(plan.image, task)
            _state_build(job, plan, step, source=source, target=target, stop=stop)
    services.state_use(state_id=state_id)
    services.task_status_set(
        job_id=job.job_id, task_id=task.task_id, status=PrepareStatus.SUCCEEDED, cached=not must_build
    )
    return must_build


def _state_invalidate(state_id: str, target) -> None:
    """A dirty or incomplete cached state (no marker, no PG_VERSION, a stale postmaster.pid, or a
    row without files): its files and row go before it is built again."""
    if target.exists():
        log.warning("state %s is dirty or incomplete: rebuilding it", state_id)
        postgres.discard(target)
    services.state_invalidate(state_id=state_id)


def _input_dir(image: images.Image, task: plans.StateExecuteTask):
    if task.parent_state_id is None:
        return steps.base_ensure(image)
    parent = statefs.state_dir(image.version, task.parent_state_id)
    if not statefs.is_complete(parent, statefs.BUILD_MARKER):
        raise PrepareFailed("internal_error", f"input state {task.parent_state_id} is missing or incomplete")
    return parent


def _state_build(job, plan: Plan, step: PlanStep, *, source, target, stop) -> None:
    task = step.task
    runtime = statefs.job_runtime_dir(job.job_id)
    _runtime_clear(job.job_id)
    statefs.refuse_runtime_inside_states(runtime)
    statefs.data_dir_copy(source, runtime)
    postgres.own(runtime)
    server = postgres.start(plan.image, runtime)
    clean = False
    command = steps.step_command(plan.request, plan.image, step.planned.step, server)
    try:
        code = postgres.run_lines(
            command.args,
            env=command.env,
            stdin=command.stdin,
            cwd=command.cwd,
            on_lines=lambda lines: services.job_log(job_id=job.job_id, task_id=task.task_id, lines=lines),
            stop=stop,
            on_quiet=lambda seconds: services.job_log(
                job_id=job.job_id, task_id=task.task_id, lines=[f"heartbeat: {task.task_id} running for {seconds:.0f}s"]
            ),
            quiet_sec=settings.SQLRS_HEARTBEAT_SEC,
        )
        if code is None:
            raise statefs.Stopped("stopped while the step ran")
        if code != 0:
            program = Path(command.args[0]).name
            raise PrepareFailed(
                "step_failed", f"{program} exited with code {code} in {task.task_id}", "see the log events"
            )
        postgres.checkpoint(server)  # PrepareSnapshot: a clean, checkpointed stop
        clean = True
    finally:
        postgres.stop(runtime, immediate=not clean)
    (runtime / "postmaster.opts").unlink(missing_ok=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    runtime.rename(target)  # the runtime is thrown away anyway: moving it is the snapshot
    statefs.write_marker(target, statefs.BUILD_MARKER)
    services.state_record(
        task=task, image=plan.image, prepare_kind=job.prepare_kind, size_bytes=statefs.size_bytes(target)
    )


def _workspaces(job_id: str) -> tuple[Path, Path]:
    """Where a job runs servers: its step's runtime and its (Liquibase) planning copy."""
    return statefs.job_runtime_dir(job_id), statefs.job_dir(job_id) / "plan"


def _runtime_clear(job_id: str) -> None:
    """Stop a server left in the job's runtime or planning directory (by this run or a dead
    worker) and remove them; the whole job directory goes if the job was deleted meanwhile."""
    for workspace in _workspaces(job_id):
        postgres.discard(workspace)
        statefs.remove(workspace.with_name(workspace.name + ".partial"))
    if not selectors.prepare_job_exists(job_id=job_id):
        job_files_remove(job_id)


def job_files_remove(job_id: str) -> None:
    """A deleted job's files: stop the servers in its workspaces, remove its directory. Run after
    every deletion of a job's row (``signals``); its worker, if one still runs it, does it again
    when it stops."""
    for workspace in _workspaces(job_id):
        postgres.discard(workspace)
    statefs.remove(statefs.job_dir(job_id))


def job_dirs_sweep() -> dict:
    """Directories of jobs whose rows are gone (a process died between a deletion's commit and the
    removal of its files): removed, their servers stopped."""
    parent = statefs.root() / "jobs"
    names = [path.name for path in parent.iterdir() if JOB_ID.match(path.name)] if parent.is_dir() else []
    known = selectors.prepare_jobs_existing(job_ids=names)
    orphans = [name for name in names if name not in known]
    for job_id in orphans:
        job_files_remove(job_id)
    return {"removed": len(orphans)}


def _instance_prepare(job: PrepareJob, plan: Plan, *, stop) -> dict:
    task = plan.instance_task
    services.task_status_set(job_id=job.job_id, task_id=task.task_id, status=PrepareStatus.RUNNING)
    instance = instance_start(image=plan.image, state_id=task.input_id, job_id=job.job_id)
    services.task_status_set(job_id=job.job_id, task_id=task.task_id, status=PrepareStatus.SUCCEEDED)
    return {
        "dsn": instance.dsn,
        "instance_id": instance.instance_id,
        "state_id": task.input_id,
        "image_id": plan.image.resolved_id,
        "prepare_kind": job.prepare_kind,
        "prepare_args_normalized": job.prepare_args_normalized,
    }


def instance_start(*, image: images.Image, state_id: str, job_id: str | None) -> Instance:
    """A new instance: a copy of the state, its server started, its row written."""
    instance_id = uuid.uuid4().hex
    data_dir = statefs.instance_dir(instance_id)
    statefs.data_dir_copy(statefs.state_dir(image.version, state_id), data_dir)
    postgres.own(data_dir)
    try:
        server = postgres.start(image, data_dir)
        return services.instance_create(
            instance_id=instance_id, state_id=state_id, image=image, job_id=job_id, server=server, data_dir=data_dir
        )
    except BaseException:
        postgres.discard(data_dir)
        raise
