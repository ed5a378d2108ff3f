"""The service's answers as dataclasses. Fields a newer service adds are left out, times are
datetimes; :func:`to_json` turns any of them back into JSON values."""

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

FINISHED_STATUSES = frozenset({"succeeded", "failed", "canceled", "lost"})
STAGES = ("event-ingest", "shard-splitter", "shard-worker", "mysql-sender")
QUEUE_STAGES = STAGES[1:]  # the stages with a queue: each works on what the one before it finished
TRANSITIONS = ("start", "done", "fail", "retry")


def parsed[T](kind: type[T], data: dict) -> T:
    """``data`` (an answer's JSON object) as the dataclass ``kind``."""
    hints = typing.get_type_hints(kind)
    return kind(**{f.name: _value(hints[f.name], data[f.name]) for f in dataclasses.fields(kind) if f.name in data})


def _value(hint, value):
    if value is None:
        return None
    for kind in typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,):
        if kind is datetime:
            return datetime.fromisoformat(value)
        if typing.get_origin(kind) is list and dataclasses.is_dataclass(item := typing.get_args(kind)[0]):
            return [parsed(item, entry) for entry in value]
    return value


def to_json(value: Any) -> Any:
    """A dataclass (or a list of them) as JSON values, times in ISO 8601."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [to_json(item) for item in value]
    if isinstance(value, dict):
        return {key: to_json(item) for key, item in value.items()}
    if isinstance(value, datetime):
        return value.isoformat()
    return value


# --- jobs -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobSpec:
    """A job to enqueue: the trigger's fields. Unset (None) fields take the service's defaults."""

    queue: str
    task: str
    lock_key: str
    args: dict | None = None
    idempotency_key: str | None = None
    partition_key: str | None = None
    priority: int | None = None
    available_at: datetime | None = None
    max_attempts: int | None = None
    lease_ttl_sec: int | None = None
    producer: str | None = None
    consumer_group: str | None = None
    depends_on: list[str] | None = None
    run_anyway: bool | None = None

    def body(self) -> dict:
        return {name: value for name, value in to_json(self).items() if value is not None}


@dataclass(frozen=True)
class Enqueued:
    """A trigger's answer; ``created`` is false when the idempotency key named a job already there."""

    job_id: str
    status: str
    created: bool
    idempotency_key: str | None = None  # the key the trigger carried (the client's own when none was given)


@dataclass(frozen=True)
class LinkedJob:
    job_id: str
    task: str
    status: str
    run_anyway: bool


@dataclass(frozen=True)
class Job:
    job_id: str
    status: str
    attempt: int
    queue: str
    task: str
    args: dict
    lock_key: str
    progress: dict
    created_at: datetime
    waiting: bool = False
    started_at: datetime | None = None
    finished_at: datetime | None = None
    heartbeat_at: datetime | None = None
    error: str | None = None
    idempotency_key: str | None = None
    partition_key: str = ""
    priority: int = 100
    available_at: datetime | None = None
    max_attempts: int = 5
    lease_ttl_sec: int | None = None
    lease_expires_at: datetime | None = None
    cancel_requested: bool = False
    producer: str | None = None
    consumer_group: str | None = None
    depends_on: list[LinkedJob] = field(default_factory=list)  # a job's own answers only, not the list's
    needed_by: list[LinkedJob] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.status in FINISHED_STATUSES


@dataclass(frozen=True)
class JobEvent:
    """A line of a job's journal: ``kind`` is queued, picked, heartbeat, requeue, done, failed, canceled, ..."""

    event_id: int
    job_id: str
    queue: str
    ts: datetime
    kind: str
    payload: dict | None = None


@dataclass(frozen=True)
class Counts:
    """What an action over a filter changed (a dry run only counts)."""

    matched: int
    changed: int
    requested: int
    skipped: int
    dry_run: bool


@dataclass(frozen=True)
class QueueState:
    name: str
    paused: bool
    depth: dict
    changed_at: datetime | None = None
    changed_by: str = ""
    max_running: int | None = None
    rate_limit: int | None = None
    rate_period_sec: int | None = None
    per_partition: bool = False
    started_in_period: int | None = None


@dataclass(frozen=True)
class QueueChange:
    queue: str
    paused: bool
    changed: bool  # false when the queue already was in that state


# --- tracking ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Registration:
    filename: str
    shards: list[int]
    created: bool


@dataclass(frozen=True)
class EventIngestDone:
    filename: str
    updated_rows: int


@dataclass(frozen=True)
class Transition:
    """A shard's stage status after a move."""

    filename: str
    shard: int
    stage: str
    status: str


@dataclass(frozen=True)
class QueueItem:
    """A (file, shard) ready for a stage, or claimed for it."""

    filename: str
    shard: int
    created_at: datetime


@dataclass(frozen=True)
class ShardStatus:
    shard: int
    event_ingest_status: str
    shard_splitter_status: str
    shard_worker_status: str
    mysql_sender_status: str
    updated_at: datetime

    def status_of(self, stage: str) -> str:
        return getattr(self, f"{stage.replace('-', '_')}_status")


@dataclass(frozen=True)
class FileStatus:
    filename: str
    shards: list[ShardStatus]


@dataclass(frozen=True)
class Summary:
    """``by_stage``: counts by status per stage column; ``by_shard``: total, done and failed per shard."""

    total: int
    by_stage: dict
    by_shard: list[dict]


@dataclass
class WorkReport:
    """What a tracking loop did: the items it marked done, and those it marked failed with their errors."""

    done: list[QueueItem] = field(default_factory=list)
    failed: list[tuple[QueueItem, str]] = field(default_factory=list)
    conflicts: list[QueueItem] = field(default_factory=list)  # moved by someone else meanwhile: left as they are
