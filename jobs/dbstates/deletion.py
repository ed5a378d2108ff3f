"""Deleting instances, states (as a tree) and prepare jobs: sqlrs's DeleteResult (seed 1.7, 2.4).

The whole tree is built and checked first, with its rows locked (so no prepare adds a child or
an instance meanwhile; a dry run reads one snapshot instead); only when no node is blocked is
anything removed: nothing is deleted partially. A row gone before it could be read is a 404.
Connection tracking is real: an instance with client sessions in its server's
``pg_stat_activity`` is blocked unless ``force``, which terminates them.
"""

from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from django.db import transaction

from jobs.dbstates import postgres, selectors, statefs
from jobs.dbstates.models import Instance, PrepareJob, State
from jobs.services.operators import Selection, jobs_cancel
from pipeline_project.core.errors import NotFoundError
from pipeline_project.core.snapshot import snapshot

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


def _state_tree(root: State, *, recurse: bool, force: bool, lock: bool) -> Node:
    """The state's node: with ``recurse`` its whole subtree (states, then instances); without,
    blocked by any child or instance. Read level by level, each level in one statement."""
    children: dict[str, list[State]] = {}
    members, level = [root], [root.state_id]
    while level:
        found = list(_rows(State.objects.filter(parent_id__in=level).order_by("created_at", "state_id"), lock=lock))
        for state in found:
            children.setdefault(state.parent_id, []).append(state)
        level = [state.state_id for state in found] if recurse else []
        members += found if recurse else []
    ids = [state.state_id for state in members]
    instances: dict[str, list[Instance]] = {}
    for instance in _rows(Instance.objects.filter(state_id__in=ids).order_by("created_at", "instance_id"), lock=lock):
        instances.setdefault(instance.state_id, []).append(instance)
    busy = selectors.states_in_use(ids)

    def node_of(state: State) -> Node:
        node = Node("state", state.state_id, blocked=ACTIVE_TASKS if state.state_id in busy else "", row=state)
        child_states, own_instances = children.get(state.state_id, []), instances.get(state.state_id, [])
        if not recurse:
            node.blocked = node.blocked or (HAS_DESCENDANTS if child_states or own_instances else "")
            return node
        node.children = [node_of(child) for child in child_states]
        node.children += [_instance_node(instance, force=force) for instance in own_instances]
        if not node.blocked and any(child.blocked for child in node.children):
            node.blocked = BLOCKED_BY_DESCENDANT
        return node

    return node_of(root)


def _rows(queryset, *, lock: bool):
    return queryset.select_for_update() if lock else queryset


@contextmanager
def _tree_reads(*, dry_run: bool):
    """A dry run reads one snapshot; a deletion locks what it reads, in one transaction, until
    it has removed it."""
    with snapshot() if dry_run else transaction.atomic():
        yield


def _one(queryset, *, lock: bool, what: str):
    """The row (locked for a deletion), or a 404: it may have gone since the request named it."""
    row = _rows(queryset, lock=lock).first()
    if row is None:
        raise NotFoundError(f"{what} not found", code="not_found")
    return row


def _finish(root: Node, *, dry_run: bool, remove) -> DeleteResult:
    if root.blocked:
        return DeleteResult(dry_run=dry_run, outcome="blocked", root=root)
    if dry_run:
        return DeleteResult(dry_run=True, outcome="would_delete", root=root)
    remove(root)
    return DeleteResult(dry_run=False, outcome="deleted", root=root)


def instance_delete(*, instance_id: str, force: bool = False, dry_run: bool = False) -> DeleteResult:
    with _tree_reads(dry_run=dry_run):
        found = Instance.objects.filter(instance_id=instance_id)
        instance = _one(found, lock=not dry_run, what=f"instance {instance_id}")
        return _finish(_instance_node(instance, force=force), dry_run=dry_run, remove=_remove_tree)


def state_delete(*, state_id: str, recurse: bool = False, force: bool = False, dry_run: bool = False) -> DeleteResult:
    with _tree_reads(dry_run=dry_run):
        state = _one(State.objects.filter(state_id=state_id), lock=not dry_run, what=f"state {state_id}")
        tree = _state_tree(state, recurse=recurse, force=force, lock=not dry_run)
        return _finish(tree, dry_run=dry_run, remove=_remove_tree)


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
    """A job's rows (its directory follows them: ``signals``). A queued or running job is blocked
    (active_tasks) unless ``force``, which cancels its queue job too."""
    with _tree_reads(dry_run=dry_run):
        job = _one(PrepareJob.objects.filter(job_id=job_id), lock=not dry_run, what=f"prepare job {job_id}")
        active = not job.is_terminal
        node = Node("job", job_id, blocked=ACTIVE_TASKS if active and not force else "", row=job)

        def remove(_node: Node) -> None:
            job.delete()
            if active and job.queue_job_id:
                jobs_cancel(selection=Selection.of_ids([job.queue_job_id]), by="sqlrs")

        return _finish(node, dry_run=dry_run, remove=remove)
