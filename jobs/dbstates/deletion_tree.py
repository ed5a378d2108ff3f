"""What a deletion covers: the tree of an instance or a state (sqlrs's DeleteResult, seed 1.7, 2.4),
each node blocked or not; ``services.deletions`` reads it (its rows locked) and removes it.

Connection tracking is real: an instance with client sessions in its server's
``pg_stat_activity`` is blocked unless ``force``, which terminates them.
"""

from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from jobs.dbstates import selectors
from jobs.dbstates.engine import postgres
from jobs.dbstates.models import Instance, State

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


def instance_node(instance: Instance, *, force: bool) -> Node:
    connections = instance_connections(instance)
    return Node(
        "instance",
        instance.instance_id,
        blocked=ACTIVE_CONNECTIONS if connections and not force else "",
        connections=connections,
        runtime_id=instance.runtime_dir,
        row=instance,
    )


def state_tree(root: State, *, recurse: bool, force: bool, lock: bool) -> Node:
    """The state's node: with ``recurse`` its whole subtree (states, then instances); without,
    blocked by any child or instance. Read level by level, each level in one statement."""
    children: dict[str, list[State]] = {}
    members, level = [root], [root.state_id]
    while level:
        found = list(lockable(State.objects.filter(parent_id__in=level).order_by("created_at", "state_id"), lock=lock))
        for state in found:
            children.setdefault(state.parent_id, []).append(state)
        level = [state.state_id for state in found] if recurse else []
        members += found if recurse else []
    ids = [state.state_id for state in members]
    instances: dict[str, list[Instance]] = {}
    for instance in lockable(
        Instance.objects.filter(state_id__in=ids).order_by("created_at", "instance_id"), lock=lock
    ):
        instances.setdefault(instance.state_id, []).append(instance)
    busy = selectors.states_in_use(ids)

    def node_of(state: State) -> Node:
        node = Node("state", state.state_id, blocked=ACTIVE_TASKS if state.state_id in busy else "", row=state)
        child_states, own_instances = children.get(state.state_id, []), instances.get(state.state_id, [])
        if not recurse:
            node.blocked = node.blocked or (HAS_DESCENDANTS if child_states or own_instances else "")
            return node
        node.children = [node_of(child) for child in child_states]
        node.children += [instance_node(instance, force=force) for instance in own_instances]
        if not node.blocked and any(child.blocked for child in node.children):
            node.blocked = BLOCKED_BY_DESCENDANT
        return node

    return node_of(root)


def lockable(queryset, *, lock: bool):
    """The rows, locked when a deletion (not a dry run) reads them."""
    return queryset.select_for_update() if lock else queryset
