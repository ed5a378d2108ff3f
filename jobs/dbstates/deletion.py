"""Deleting instances, states (as a tree) and prepare jobs: sqlrs's DeleteResult (seed 1.7, 2.4).

The whole tree is built and checked first, with its rows locked (so no prepare adds a child or
an instance meanwhile); only when no node is blocked is anything removed: nothing is deleted
partially. Connection tracking is real: an instance with client sessions in its server's
``pg_stat_activity`` is blocked unless ``force``, which terminates them.
"""

from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from django.db import transaction

from jobs.dbstates import postgres, selectors, statefs
from jobs.dbstates.models import Instance, PrepareJob, State
from jobs.services.operators import Selection, jobs_cancel

ACTIVE_CONNECTIONS = "active_connections"
ACTIVE_TASKS = "active_tasks"
HAS_DESCENDANTS = "has_descendants"
BLOCKED_BY_DESCENDANT = "blocked_by_descendant"


@dataclass
class Node:
    kind: str
    id: str
    blocked: str = ""
    connections: int | None = None
    runtime_id: str = ""
    children: list["Node"] = field(default_factory=list)
    row: object = None

    def as_dict(self) -> dict:
        shape = {"kind": self.kind, "id": self.id}
        if self.connections is not None:
            shape["connections"] = self.connections
        if self.runtime_id:
            shape["runtime_id"] = self.runtime_id
        if self.blocked:
            shape["blocked"] = self.blocked
        if self.children:
            shape["children"] = [child.as_dict() for child in self.children]
        return shape

    def walk(self):
        for child in self.children:
            yield from child.walk()
        yield self  # children first: the order things are removed in


@dataclass
class DeleteResult:
    dry_run: bool
    outcome: str
    root: Node

    def as_dict(self) -> dict:
        return {"dry_run": self.dry_run, "outcome": self.outcome, "root": self.root.as_dict()}


def instance_connections(instance: Instance) -> int:
    """Client sessions on the instance's server now (0 when it is not running)."""
    server = postgres.running(Path(instance.runtime_dir))
    if server is None:
        return 0
    try:
        return len(postgres.client_sessions(server))
    except psycopg.Error:
        return 0  # starting or stopping: nobody can be connected


def _instance_node(instance: Instance, *, force: bool) -> Node:
    connections = instance_connections(instance)
    return Node(
        "instance",
        instance.instance_id,
        blocked=ACTIVE_CONNECTIONS if connections and not force else "",
        connections=connections,
        runtime_id=instance.runtime_dir,
        row=instance,
    )


def _state_node(state: State, *, recurse: bool, force: bool) -> Node:
    node = Node("state", state.state_id, row=state)
    children = list(State.objects.select_for_update().filter(parent=state).order_by("created_at"))
    instances = list(Instance.objects.select_for_update().filter(state=state).order_by("created_at"))
    if selectors.running_tasks_on(state.state_id).exists():
        node.blocked = ACTIVE_TASKS
    if not recurse:
        if children or instances:
            node.blocked = node.blocked or HAS_DESCENDANTS
        return node
    node.children = [_state_node(child, recurse=True, force=force) for child in children]
    node.children += [_instance_node(instance, force=force) for instance in instances]
    if not node.blocked and any(child.blocked for child in node.children):
        node.blocked = BLOCKED_BY_DESCENDANT
    return node


def _finish(root: Node, *, dry_run: bool, remove) -> DeleteResult:
    if root.blocked:
        return DeleteResult(dry_run=dry_run, outcome="blocked", root=root)
    if dry_run:
        return DeleteResult(dry_run=True, outcome="would_delete", root=root)
    remove(root)
    return DeleteResult(dry_run=False, outcome="deleted", root=root)


def instance_delete(*, instance_id: str, force: bool = False, dry_run: bool = False) -> DeleteResult:
    with transaction.atomic():
        instance = selectors.instance_get(instance_id=instance_id)
        instance = Instance.objects.select_for_update().get(pk=instance.pk)
        return _finish(_instance_node(instance, force=force), dry_run=dry_run, remove=_remove_tree)


def state_delete(*, state_id: str, recurse: bool = False, force: bool = False, dry_run: bool = False) -> DeleteResult:
    with transaction.atomic():
        selectors.state_get(state_id=state_id)
        state = State.objects.select_for_update().get(pk=state_id)
        return _finish(_state_node(state, recurse=recurse, force=force), dry_run=dry_run, remove=_remove_tree)


def _remove_tree(root: Node) -> None:
    """Stop the tree's servers, delete its rows (children first), then its files."""
    paths = []
    for node in root.walk():
        if node.kind == "instance":
            data_dir = Path(node.row.runtime_dir)
            server = postgres.running(data_dir)
            if server is not None and node.connections:
                postgres.terminate_sessions(server)
            postgres.stop(data_dir, immediate=True)
            paths += [data_dir, postgres.log_path(data_dir)]
            node.row.delete()
        else:
            paths.append(statefs.state_dir(node.row.engine_version, node.id))
            node.row.delete()
    transaction.on_commit(lambda: [statefs.remove(path) for path in paths])


def prepare_job_delete(*, job_id: str, force: bool = False, dry_run: bool = False) -> DeleteResult:
    """A job's rows and its directory. A queued or running job is blocked (active_tasks) unless
    ``force``, which cancels it first (its worker stops the step and clears its runtime)."""
    with transaction.atomic():
        selectors.job_get(job_id=job_id)
        job = PrepareJob.objects.select_for_update().get(pk=job_id)
        active = not job.is_terminal
        node = Node("job", job_id, blocked=ACTIVE_TASKS if active and not force else "", row=job)

        def remove(_node: Node) -> None:
            job.delete()
            if active and job.queue_job_id:  # its worker stops and removes the job's directory
                jobs_cancel(selection=Selection.of_ids([job.queue_job_id]), by="sqlrs")
            else:
                transaction.on_commit(lambda: statefs.remove(statefs.job_dir(job_id)))

        return _finish(node, dry_run=dry_run, remove=remove)
