"""Each command: the client's call for the parsed arguments. A command returns what to print,
or, when it printed as it went, an exit code."""

import argparse

from pipeline_client.cli.exits import JOB_UNSUCCESSFUL, OK
from pipeline_client.cli.output import Output
from pipeline_client.client import Client

TRIGGER_OPTIONS = (
    "args",
    "idempotency_key",
    "partition_key",
    "priority",
    "available_at",
    "max_attempts",
    "lease_ttl_sec",
    "depends_on",
    "run_anyway",
)
FILTERS = (
    "queue",
    "task",
    "status",
    "lock_key",
    "partition_key",
    "idempotency_key",
    "args",
    "error",
    "created_after",
    "created_before",
)


class UsageError(Exception):
    """Arguments the parser lets through that still make no request."""


def _given(args: argparse.Namespace, names: tuple[str, ...]) -> dict:
    return {name: getattr(args, name) for name in names if getattr(args, name) is not None}


def trigger(client: Client, args, output: Output):
    return client.jobs.trigger(args.queue, args.task, lock_key=args.lock_key, **_given(args, TRIGGER_OPTIONS))


def status(client: Client, args, output: Output):
    return client.jobs.status(args.job_id)


def cancel(client: Client, args, output: Output):
    return client.jobs.cancel(args.job_id)


def follow(client: Client, args, output: Output) -> int:
    for event in client.jobs.follow(args.job_id, after=args.after):
        output.event(event)
    job = client.jobs.status(args.job_id)
    output.note(f"job {job.job_id} {job.status}")
    return OK if job.status == "succeeded" else JOB_UNSUCCESSFUL


def retry(client: Client, args, output: Output):
    filters = _given(args, FILTERS)
    if not filters and not args.every_job:
        raise UsageError("name at least one filter (--queue, --status, ...), or --all")
    return client.jobs.retry_matching(dry_run=args.dry_run, every_job=args.every_job, **filters)


def queue_pause(client: Client, args, output: Output):
    return client.jobs.pause(args.name, create=args.create)


def queue_resume(client: Client, args, output: Output):
    return client.jobs.resume(args.name)


def queue_list(client: Client, args, output: Output):
    return client.jobs.queues()


def tracking_register(client: Client, args, output: Output):
    return client.tracking.register(args.filename, args.shards)


def tracking_move(client: Client, args, output: Output):
    if args.stage == "event-ingest":
        if args.transition != "done" or args.shard is not None:
            raise UsageError("event-ingest takes only done, for every shard of the file (no --shard)")
        return client.tracking.event_ingest_done(args.filename)
    if args.shard is None:
        raise UsageError(f"{args.stage} {args.transition} needs --shard")
    return client.tracking.move(args.stage, args.transition, args.filename, args.shard)


def tracking_show(client: Client, args, output: Output):
    return client.tracking.file(args.filename)


COMMANDS = {
    ("trigger", None): trigger,
    ("status", None): status,
    ("cancel", None): cancel,
    ("follow", None): follow,
    ("retry", None): retry,
    ("queue", "pause"): queue_pause,
    ("queue", "resume"): queue_resume,
    ("queue", "list"): queue_list,
    ("tracking", "register"): tracking_register,
    ("tracking", "move"): tracking_move,
    ("tracking", "show"): tracking_show,
}
