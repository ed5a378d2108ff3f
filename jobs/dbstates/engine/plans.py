"""A prepare job's plan, by name: plan → resolve-image → one state_execute per step →
prepare-instance. Each task carries the columns its PrepareTask row keeps."""

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

from jobs.dbstates import selectors
from jobs.dbstates.engine import images, liquibase, prepare_args, steps
from jobs.dbstates.models import TaskType


@dataclass(frozen=True)
class PlannedTask:
    task_id: str

    type: ClassVar[str]
    done_when_planned: ClassVar[bool] = False  # planning itself did it: stored succeeded

    @property
    def columns(self) -> dict:
        """Its row's columns besides task_id and type."""
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(self) if field.name != "task_id"}


@dataclass(frozen=True)
class PlanTask(PlannedTask):
    planner_kind: str

    type: ClassVar[str] = TaskType.PLAN
    done_when_planned: ClassVar[bool] = True


@dataclass(frozen=True)
class ResolveImageTask(PlannedTask):
    image_id: str
    resolved_image_id: str

    type: ClassVar[str] = TaskType.RESOLVE_IMAGE
    done_when_planned: ClassVar[bool] = True


@dataclass(frozen=True)
class StateExecuteTask(PlannedTask):
    input_kind: str  # "image" or "state"
    input_id: str
    task_hash: str
    output_state_id: str
    cached: bool  # the state existed when the job was planned
    args_summary: str
    changeset_id: str = ""  # lb steps: the changeset they apply
    changeset_author: str = ""
    changeset_path: str = ""

    type: ClassVar[str] = TaskType.STATE_EXECUTE

    @property
    def parent_state_id(self) -> str | None:
        return self.input_id if self.input_kind == "state" else None


@dataclass(frozen=True)
class PrepareInstanceTask(PlannedTask):
    input_id: str  # the state the instance is a copy of
    input_kind: str = "state"
    instance_mode: str = "ephemeral"

    type: ClassVar[str] = TaskType.PREPARE_INSTANCE


@dataclass(frozen=True)
class PlanStep:
    """A step to run and the task that makes its state."""

    task: StateExecuteTask
    planned: steps.PlannedStep


@dataclass(frozen=True)
class Plan:
    image: images.Image
    request: object  # prepare_args.PsqlRequest or liquibase.LiquibaseRequest
    plan_task: PlanTask
    image_task: ResolveImageTask
    steps: list[PlanStep]
    instance_task: PrepareInstanceTask

    @property
    def tasks(self) -> list[PlannedTask]:
        """Every task, in the order the job shows them."""
        return [self.plan_task, self.image_task, *(step.task for step in self.steps), self.instance_task]

    def signature(self, *, plan_only: bool) -> str:
        """The job's signature (what retention groups jobs by)."""
        return prepare_args.signature(
            task_hashes=[step.task.task_hash for step in self.steps],
            resolved_image_id=self.image.resolved_id,
            plan_only=plan_only,
        )


def _changeset_fields(step) -> dict:
    if not isinstance(step, liquibase.Changeset):
        return {}
    return {"changeset_id": step.id, "changeset_author": step.author, "changeset_path": step.path}


def plan_make(*, job, image: images.Image, request, planned: list[steps.PlannedStep]) -> Plan:
    """The job's plan from its planned steps (a step whose state is built already is marked cached)."""
    links = prepare_args.chain(
        [p.step for p in planned], [p.task_hash for p in planned], resolved_image_id=image.resolved_id
    )
    existing = selectors.states_existing(state_ids=[link.output_state_id for link in links])
    plan_steps = [
        PlanStep(
            StateExecuteTask(
                f"execute-{n}",
                input_kind=link.input_kind,
                input_id=link.input_id,
                task_hash=link.task_hash,
                output_state_id=link.output_state_id,
                cached=link.output_state_id in existing,
                args_summary=step.summary,
                **_changeset_fields(step.step),
            ),
            step,
        )
        for n, (link, step) in enumerate(zip(links, planned, strict=True))
    ]
    return Plan(
        image=image,
        request=request,
        plan_task=PlanTask("plan", planner_kind=job.prepare_kind),
        image_task=ResolveImageTask("resolve-image", image_id=job.image_id, resolved_image_id=image.resolved_id),
        steps=plan_steps,
        instance_task=PrepareInstanceTask("prepare-instance", input_id=links[-1].output_state_id),
    )
