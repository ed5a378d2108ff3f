"""Reads of the engine's metadata, shaped as the sqlrs API's entries (PrepareJobStatus,
TaskEntry, InstanceEntry, NameEntry, StateEntry): the API, the admin and the CLI see one shape."""

import re
from datetime import UTC, datetime

from django.db.models import Count, Q

from jobs.dbstates.models import (
    Instance,
    InstanceStatus,
    Name,
    PrepareEvent,
    PrepareJob,
    PrepareStatus,
    PrepareTask,
    State,
)
from pipeline_project.api.errors import InvalidInputError, NotFoundError
from pipeline_project.db.snapshot import snapshot

ID_PREFIX = re.compile(r"^[0-9a-fA-F]{8,64}$")
INSTANCE_ID = re.compile(r"^[0-9a-f]{32}$")
MAX_FILTER = 300  # characters of a list's text filter


def rfc3339(moment: datetime | None) -> str | None:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z") if moment else None


def _timestamps(row, *names) -> dict:
    return {name: rfc3339(getattr(row, name)) for name in names if getattr(row, name)}


def _id_prefix(value: str | None) -> str | None:
    if value is None:
        return None
    if not ID_PREFIX.match(value):
        raise InvalidInputError("id_prefix must be at least 8 hex characters", code="invalid_argument")
    return value.lower()


def _text_filter(value: str | None, name: str) -> str | None:
    if value is not None and (not value or len(value) > MAX_FILTER):
        raise InvalidInputError(f"{name} must be 1 to {MAX_FILTER} characters", code="invalid_argument")
    return value


# Prepare jobs and their tasks


def prepare_job_get(*, job_id: str) -> PrepareJob:
    job = PrepareJob.objects.filter(job_id=job_id).first() if len(job_id) <= 64 else None
    if job is None:
        raise NotFoundError(f"prepare job {job_id} not found", code="not_found")
    return job


def prepare_job_progress_get(*, job_id: str) -> tuple[str, int]:
    """(status, number of events) of a job, read in one statement; a 404 if there is none."""
    jobs = PrepareJob.objects.filter(job_id=job_id).annotate(event_count=Count("events"))
    row = jobs.values_list("status", "event_count").first() if len(job_id) <= 64 else None
    if row is None:
        raise NotFoundError(f"prepare job {job_id} not found", code="not_found")
    return row


def prepare_job_exists(*, job_id: str) -> bool:
    return PrepareJob.objects.filter(job_id=job_id).exists()


def prepare_jobs_existing(*, job_ids: list[str]) -> set[str]:
    """Those of the ids that name a prepare job (one statement)."""
    return set(PrepareJob.objects.filter(job_id__in=job_ids).values_list("job_id", flat=True))


def prepare_job_planned(*, job_id: str) -> bool:
    """Whether the job's plan is stored (its tasks written)."""
    return PrepareTask.objects.filter(job_id=job_id).exists()


def task_succeeded(*, job_id: str, task_id: str) -> bool:
    return PrepareTask.objects.filter(job_id=job_id, task_id=task_id, status=PrepareStatus.SUCCEEDED).exists()


@snapshot()
def prepare_job_status_get(*, job_id: str) -> dict:
    """A job's PrepareJobStatus: the job and its tasks from one snapshot."""
    return prepare_job_status(prepare_job_get(job_id=job_id))


def prepare_jobs_list(*, job: str | None = None):
    jobs = PrepareJob.objects.order_by("created_at", "job_id")
    if _text_filter(job, "job"):
        jobs = jobs.filter(job_id__startswith=job)
    return jobs


def _job_fields(job: PrepareJob) -> dict:
    return {
        "job_id": job.job_id,
        "status": job.status,
        "prepare_kind": job.prepare_kind,
        "image_id": job.image_id,
        "plan_only": job.plan_only,
        **_timestamps(job, "created_at", "started_at", "finished_at"),
    }


def prepare_job_entry(job: PrepareJob) -> dict:
    entry = _job_fields(job)
    for name in ("resolved_image_id", "prepare_args_normalized", "signature"):
        if getattr(job, name):
            entry[name] = getattr(job, name)
    return entry


def prepare_job_status(job: PrepareJob) -> dict:
    status = {
        **_job_fields(job),
        "prepare_args_normalized": job.prepare_args_normalized,
        "result": job.result,
        "error": job.error,
    }
    tasks = list(job.tasks.all())
    if tasks:
        status["tasks"] = [plan_task(task) for task in tasks]
    return status


def _input(task: PrepareTask) -> dict:
    return {"kind": task.input_kind, "id": task.input_id}


def plan_task(task: PrepareTask) -> dict:
    """A task as the plan shows it (PreparePlanTask: each type its own fields)."""
    shape = {"task_id": task.task_id, "type": task.type}
    if task.type == "plan":
        shape["planner_kind"] = task.planner_kind
    elif task.type == "resolve_image":
        shape.update(image_id=task.image_id, resolved_image_id=task.resolved_image_id)
    elif task.type == "state_execute":
        shape.update(
            input=_input(task),
            task_hash=task.task_hash,
            output_state_id=task.output_state_id,
            cached=bool(task.cached),
        )
    else:
        shape.update(input=_input(task), instance_mode=task.instance_mode)
    return shape


def tasks_list(*, job: str | None = None):
    tasks = PrepareTask.objects.order_by("job__created_at", "job_id", "position")
    if _text_filter(job, "job"):
        tasks = tasks.filter(job_id=job)
    return tasks


def task_entry(task: PrepareTask) -> dict:
    entry = {"task_id": task.task_id, "job_id": task.job_id, "type": task.type, "status": task.status}
    if task.input_kind:
        entry["input"] = _input(task)
    if task.cached is not None:
        entry["cached"] = task.cached
    for name in (
        "planner_kind",
        "task_hash",
        "output_state_id",
        "instance_mode",
        "image_id",
        "resolved_image_id",
        "args_summary",
        "changeset_id",
        "changeset_author",
        "changeset_path",
    ):
        if getattr(task, name):
            entry[name] = getattr(task, name)
    return entry


def event_line(event: PrepareEvent) -> dict:
    line = {"type": event.type, "ts": rfc3339(event.ts)}
    for name in ("task_id", "status", "message"):
        if getattr(event, name):
            line[name] = getattr(event, name)
    for name in ("result", "error"):
        if getattr(event, name) is not None:
            line[name] = getattr(event, name)
    return line


async def prepare_job_events_page(*, pool, job_id: str, start: int, limit: int) -> list[dict]:
    """Events from position ``start`` on, in order, as the events stream sends them (for an async stream)."""
    async with pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT type, ts, task_id, status, message, result, error FROM sqlrs_events"
            " WHERE job_id = %(job_id)s AND seq >= %(start)s ORDER BY seq LIMIT %(limit)s",
            {"job_id": job_id, "start": start, "limit": limit},
        )
        rows = await cursor.fetchall()
    return [
        event_line(
            PrepareEvent(type=type_, ts=ts, task_id=task_id, status=status, message=message, result=result, error=error)
        )
        for type_, ts, task_id, status, message, result, error in rows
    ]


async def prepare_job_progress(*, pool, job_id: str) -> tuple[str, int] | None:
    """(status, number of events) of a job, or None if there is no such job."""
    async with pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT status, (SELECT count(*) FROM sqlrs_events WHERE job_id = j.job_id)"
            " FROM sqlrs_prepare_jobs j WHERE job_id = %(job_id)s",
            {"job_id": job_id},
        )
        row = await cursor.fetchone()
    return (row[0], row[1]) if row else None


# Instances and names


def instances_list(*, id_prefix: str | None = None, state: str | None = None, image: str | None = None):
    instances = Instance.objects.prefetch_related("names").order_by("created_at", "instance_id")
    if prefix := _id_prefix(id_prefix):
        instances = instances.filter(instance_id__startswith=prefix)
    if _text_filter(state, "state"):
        instances = instances.filter(state_id=state)
    if _text_filter(image, "image"):
        instances = instances.filter(image_id=image)
    return instances


def instance_resolve(*, ref: str) -> tuple[Instance, bool]:
    """An instance by id or, failing that, by name: (instance, whether the name resolved it)."""
    if INSTANCE_ID.match(ref):
        instance = Instance.objects.filter(instance_id=ref).first()
        if instance is not None:
            return instance, False
    name = Name.objects.select_related("instance").filter(name=ref).first() if len(ref) <= 128 else None
    if name is None or name.instance is None:
        raise NotFoundError(f"instance {ref} not found", code="not_found")
    return name.instance, True


@snapshot()
def instance_lookup(*, ref: str) -> tuple[dict, bool]:
    """An instance's entry by id or name, from one snapshot: (entry, whether the name resolved it)."""
    instance, by_name = instance_resolve(ref=ref)
    return instance_entry(instance), by_name


def instance_entry(instance: Instance) -> dict:
    names = [name.name for name in instance.names.all()]
    return {
        "instance_id": instance.instance_id,
        "image_id": instance.image_id,
        "state_id": instance.state_id,
        "name": names[0] if names else None,
        "created_at": rfc3339(instance.created_at),
        "expires_at": rfc3339(instance.expires_at),
        "status": instance.status,
    }


def names_list(*, instance: str | None = None, state: str | None = None, image: str | None = None):
    names = Name.objects.select_related("instance").order_by("name")
    if _text_filter(instance, "instance"):
        names = names.filter(instance_id=instance)
    if _text_filter(state, "state"):
        names = names.filter(state_id=state)
    if _text_filter(image, "image"):
        names = names.filter(image_id=image)
    return names


def name_get(*, name: str) -> Name:
    found = Name.objects.select_related("instance").filter(name=name).first() if len(name) <= 128 else None
    if found is None:
        raise NotFoundError(f"name {name} not found", code="not_found")
    return found


def name_entry(name: Name) -> dict:
    if name.instance is None:
        status = "missing"
    else:
        status = "active" if name.instance.status == InstanceStatus.ACTIVE else "expired"
    return {
        "name": name.name,
        "instance_id": name.instance_id,
        "image_id": name.image_id,
        "state_id": name.state_id,
        "status": status,
        "last_used_at": rfc3339(name.last_used_at),
    }


# States


def _running_tasks(lookup: str, states):
    """Running tasks that read or write the state(s) ``states`` (``lookup``: "" or "__in")."""
    return PrepareTask.objects.filter(status=PrepareStatus.RUNNING).filter(
        Q(**{f"output_state_id{lookup}": states}) | Q(input_kind="state", **{f"input_id{lookup}": states})
    )


def running_tasks_on(state_id):
    """Running tasks that read or write the state ``state_id`` (an id, or an OuterRef to one)."""
    return _running_tasks("", state_id)


def states_in_use(state_ids: list[str]) -> set[str]:
    """Those of the states that a running task reads or writes (one statement)."""
    touched = _running_tasks("__in", state_ids).values_list("output_state_id", "input_id")
    return {state_id for pair in touched for state_id in pair} & set(state_ids)


def _with_refcount(states):
    return states.annotate(refcount=Count("instances", distinct=True))


def states_list(*, id_prefix: str | None = None, kind: str | None = None, image: str | None = None):
    states = _with_refcount(State.objects.order_by("created_at", "state_id"))
    if prefix := _id_prefix(id_prefix):
        states = states.filter(state_id__startswith=prefix)
    if _text_filter(kind, "kind"):
        states = states.filter(prepare_kind=kind)
    if _text_filter(image, "image"):
        states = states.filter(Q(image_id=image) | Q(image_id__startswith=f"{image}@"))
    return states


def state_exists(*, state_id: str) -> bool:
    return State.objects.filter(state_id=state_id).exists()


def states_existing(*, state_ids: list[str]) -> set[str]:
    """Those of the ids that name a state (one statement)."""
    return set(State.objects.filter(state_id__in=state_ids).values_list("state_id", flat=True))


def state_get(*, state_id: str) -> State:
    state = _with_refcount(State.objects.filter(state_id=state_id)).first() if len(state_id) <= 64 else None
    if state is None:
        raise NotFoundError(f"state {state_id} not found", code="not_found")
    return state


def state_entry(state: State) -> dict:
    return {
        "state_id": state.state_id,
        "parent_state_id": state.parent_id,
        "image_id": state.image_id,
        "prepare_kind": state.prepare_kind,
        "prepare_args_normalized": state.prepare_args_normalized,
        "created_at": rfc3339(state.created_at),
        "size_bytes": state.size_bytes,
        "last_used_at": rfc3339(state.last_used_at),
        "use_count": state.use_count,
        "min_retention_until": rfc3339(state.min_retention_until),
        "refcount": state.refcount,
    }


def prepare_job_ids_with_stdin(*, stdin: str) -> list[str]:
    """The ids of the prepare jobs whose script on stdin is ``stdin``, oldest first (their ordering)."""
    return list(PrepareJob.objects.filter(request__stdin=stdin).values_list("job_id", flat=True))
