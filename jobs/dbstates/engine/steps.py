"""A prepare's steps, whatever its kind: what they are (planning), and the command that runs one.

psql: each ``-f``/``-c`` is a step, hashed from its content. lb: each pending changeset is a
step; finding them takes a server, so planning copies the image's base into a workspace,
asks Liquibase (``update-sql``) there, and throws the workspace away.
"""

import dataclasses
import shlex
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

from jobs.dbstates.engine import images, liquibase, postgres, prepare_args, statefs
from jobs.runtime.subprocesses import run_subprocess
from pipeline_project.db.storable import failure_text

PLAN_TIMEOUT_SEC = 600


class PlanFailed(Exception):
    def __init__(self, message: str, details: str = ""):
        super().__init__(message)
        self.details = details


@dataclass(frozen=True)
class PlannedStep:
    step: object  # a prepare_args.PsqlStep or a liquibase.Changeset
    task_hash: str
    summary: str  # the task's args_summary, and its state's prepare_args_normalized


@dataclass(frozen=True)
class StepCommand:
    args: list[str]
    env: dict[str, str]
    stdin: str | None
    cwd: str | None


KINDS = ("psql", "lb")
PSQL_FIELDS = ("psql_args", "stdin")
LIQUIBASE_FIELDS = ("liquibase_args", "liquibase_exec", "liquibase_exec_mode", "liquibase_env", "work_dir")


@dataclass(frozen=True)
class PrepareRequest:
    """What a prepare asks for (sqlrs's PrepareJobRequest), typed but not yet checked; None is a
    field not given. ``request_normalize`` applies a kind's rules to its fields."""

    prepare_kind: str
    image_id: str
    psql_args: list[str] | None = None
    stdin: str | None = None
    liquibase_args: list[str] | None = None
    liquibase_exec: str | None = None
    liquibase_exec_mode: str | None = None
    liquibase_env: dict[str, str] | None = None
    work_dir: str | None = None
    source_manifest: dict | None = None  # remote engines only: refused here
    plan_only: bool | None = None

    def stored(self) -> dict:
        """The fields its job keeps to plan from (its kind's), given or not."""
        names = LIQUIBASE_FIELDS if self.prepare_kind == "lb" else PSQL_FIELDS
        return {name: getattr(self, name) for name in names}

    @classmethod
    def of_fields(cls, fields: dict, **given) -> "PrepareRequest":
        """From a mapping of field names (a validated body, a job's stored request): the fields
        it names; ``given`` over them."""
        names = {field.name for field in dataclasses.fields(cls)}
        return cls(**{**{name: value for name, value in fields.items() if name in names}, **given})

    @classmethod
    def of_job(cls, job) -> "PrepareRequest":
        return cls.of_fields(
            job.request,
            prepare_kind=job.prepare_kind,
            image_id=job.image_id,
            plan_only=job.plan_only,
        )


def request_normalize(request: PrepareRequest):
    """A PsqlRequest, or a LiquibaseRequest for ``lb``: each kind takes its own fields only."""
    if request.prepare_kind not in KINDS:
        raise prepare_args.invalid(f"prepare_kind must be one of {', '.join(KINDS)}")
    foreign = LIQUIBASE_FIELDS if request.prepare_kind == "psql" else PSQL_FIELDS
    if given := [name for name in foreign if getattr(request, name) is not None]:
        raise prepare_args.invalid(f"{request.prepare_kind} prepares do not take {', '.join(given)}")
    if request.prepare_kind == "lb":
        return liquibase.liquibase_request_normalize(
            liquibase_args=request.liquibase_args,
            liquibase_exec=request.liquibase_exec,
            liquibase_exec_mode=request.liquibase_exec_mode,
            liquibase_env=request.liquibase_env,
            work_dir=request.work_dir,
        )
    return prepare_args.psql_request_normalize(psql_args=request.psql_args, stdin=request.stdin)


def steps_plan(
    request, image: images.Image, *, workspace: Path, stop: threading.Event | None = None
) -> list[PlannedStep]:
    """The request's steps; Liquibase's planning is killed as soon as ``stop`` is set (then
    ``statefs.Stopped``)."""
    if isinstance(request, liquibase.LiquibaseRequest):
        return [
            PlannedStep(
                changeset,
                liquibase.task_hash(request, changeset),
                f"{changeset.path}::{changeset.id}::{changeset.author}",
            )
            for changeset in _changesets(request, image, workspace=workspace, stop=stop or threading.Event())
        ]
    return [
        PlannedStep(step, prepare_args.task_hash(request, step), shlex.join(request.step_args(step)))
        for step in request.steps
    ]


def _changesets(
    request: liquibase.LiquibaseRequest, image: images.Image, *, workspace: Path, stop: threading.Event
) -> list:
    statefs.data_dir_copy(base_ensure(image), workspace)
    postgres.own(workspace)
    try:
        server = postgres.start(image, workspace)
        try:
            done = run_subprocess(
                liquibase.plan_argv(request, server.port),
                stop=stop,
                env={**postgres.client_env(server), **request.env},
                cwd=request.work_dir or "/",
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                errors="replace",  # a program's output is not ours to trust to be UTF-8
                timeout=PLAN_TIMEOUT_SEC,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise PlanFailed(f"Liquibase could not plan: {exc}") from None
        if stop.is_set():
            raise statefs.Stopped("stopped while Liquibase planned")
        if done.returncode != 0:
            raise PlanFailed(
                f"Liquibase update-sql exited with code {done.returncode}", failure_text(done.stderr, tail=True)
            )
    finally:
        postgres.discard(workspace)
    changesets = liquibase.changesets_parse(done.stdout)
    if not changesets:
        raise PlanFailed("the changelog has no pending changeset to apply")
    return changesets


def base_ensure(image: images.Image):
    """The image's initdb output, built once per image under its lock (``.init.ok`` last)."""
    base = statefs.base_dir(image.version)

    def ready() -> bool:
        return statefs.is_complete(base, statefs.INIT_MARKER)

    with statefs.build_lock(base, done=ready) as must_init:
        if must_init:
            statefs.remove(base)
            postgres.init_base(image, base)
            statefs.write_marker(base, statefs.INIT_MARKER)
    return base


def step_command(request, image: images.Image, step, server: postgres.Server) -> StepCommand:
    env = postgres.client_env(server)
    if isinstance(request, liquibase.LiquibaseRequest):
        return StepCommand(liquibase.step_argv(request, server.port), {**env, **request.env}, None, request.work_dir)
    stdin = request.stdin if step.kind == "stdin" else None
    return StepCommand([image.program("psql"), *request.step_args(step)], env, stdin, None)
