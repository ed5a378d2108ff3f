"""The command line: ``pipeline-client [options] COMMAND ...``; the options go before or after the command."""

import argparse
import json
from datetime import datetime

from pipeline_client.cli.exits import MEANINGS
from pipeline_client.models import QUEUE_STAGES, STAGES, TRANSITIONS

DESCRIPTION = """\
The pipeline control plane from a shell: enqueue and follow jobs, retry them by filter, pause
queues, register files and move their shards through the pipeline's stages.
The service's address and token come from --url and --token, or PIPELINE_URL and PIPELINE_TOKEN."""

EPILOG = "exit codes:\n" + "\n".join(f"  {code:>3}  {meaning}" for code, meaning in MEANINGS.items())


def json_object(text: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


def timestamp(text: str) -> datetime:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError("must be an ISO 8601 time, e.g. 2026-01-01T00:00:00Z") from None


def _common_options() -> argparse.ArgumentParser:
    # SUPPRESS: an option given before the command is not reset by the command's own parser.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", default=argparse.SUPPRESS, help="the service's base URL (PIPELINE_URL)")
    common.add_argument("--token", default=argparse.SUPPRESS, help="an API token (PIPELINE_TOKEN)")
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="answer in JSON")
    common.add_argument(
        "--timeout", type=float, default=argparse.SUPPRESS, help="seconds each connect and read may take"
    )
    common.add_argument("--retries", type=int, default=argparse.SUPPRESS, help="times a failed call is tried again")
    return common


def _add_trigger(commands, common) -> None:
    trigger = commands.add_parser("trigger", parents=[common], help="enqueue a job")
    trigger.add_argument("queue")
    trigger.add_argument("task")
    trigger.add_argument("--lock-key", required=True, help="jobs with one lock key never run at the same time")
    trigger.add_argument("--args", type=json_object, help="the task's arguments, a JSON object")
    trigger.add_argument("--idempotency-key", help="a key naming this job: the same key again returns it")
    trigger.add_argument("--partition-key")
    trigger.add_argument("--priority", type=int, help="lower runs first (100)")
    trigger.add_argument("--available-at", type=timestamp, help="not before this time")
    trigger.add_argument("--max-attempts", type=int)
    trigger.add_argument("--lease-ttl-sec", type=int)
    trigger.add_argument("--depends-on", action="append", metavar="JOB_ID", help="repeatable")
    trigger.add_argument("--run-anyway", action="store_true", default=None, help="even if a depends-on job failed")


def _add_job_commands(commands, common) -> None:
    for name, about in (
        ("status", "a job's status"),
        ("cancel", "cancel a job"),
        ("follow", "print a job's events until it ends"),
    ):
        command = commands.add_parser(name, parents=[common], help=about)
        command.add_argument("job_id")
    commands.choices["follow"].add_argument("--after", type=int, default=0, help="from this event id on")
    retry = commands.add_parser(
        "retry", parents=[common], help="retry every failed, canceled or lost job a filter matches"
    )
    retry.add_argument("--queue")
    retry.add_argument("--task")
    retry.add_argument("--status", action="append", help="repeatable")
    retry.add_argument("--lock-key")
    retry.add_argument("--partition-key")
    retry.add_argument("--idempotency-key")
    retry.add_argument("--args", type=json_object, help="jobs whose args contain this JSON object")
    retry.add_argument("--error", help="jobs whose error contains this text")
    retry.add_argument("--created-after", type=timestamp)
    retry.add_argument("--created-before", type=timestamp)
    retry.add_argument("--all", action="store_true", dest="every_job", help="every job (no filter needed)")
    retry.add_argument("--dry-run", action="store_true", help="only count")


def _add_queue_commands(commands, common) -> None:
    queue = commands.add_parser("queue", parents=[common], help="pause, resume or list queues")
    actions = queue.add_subparsers(dest="action", required=True, metavar="ACTION")
    pause = actions.add_parser("pause", parents=[common], help="no worker claims from the queue")
    pause.add_argument("name")
    pause.add_argument("--create", action="store_true", help="even if no job, worker or setting names it yet")
    actions.add_parser("resume", parents=[common], help="workers claim again").add_argument("name")
    actions.add_parser("list", parents=[common], help="every queue, its depth, paused or not")


def _add_tracking_commands(commands, common) -> None:
    tracking = commands.add_parser("tracking", parents=[common], help="files and shards through the stages")
    actions = tracking.add_subparsers(dest="action", required=True, metavar="ACTION")
    register = actions.add_parser("register", parents=[common], help="register a file with its shards")
    register.add_argument("filename")
    register.add_argument("shards", nargs="+", type=int, metavar="SHARD")
    move = actions.add_parser(
        "move",
        parents=[common],
        help="move a shard's stage status",
        description=f"event-ingest takes only done (every shard of the file); {', '.join(QUEUE_STAGES)} "
        "take start, done, fail or retry of one --shard.",
    )
    move.add_argument("filename")
    move.add_argument("stage", choices=STAGES)
    move.add_argument("transition", choices=TRANSITIONS)
    move.add_argument("--shard", type=int)
    actions.add_parser("show", parents=[common], help="every shard's statuses").add_argument("filename")


def build_parser() -> argparse.ArgumentParser:
    common = _common_options()
    parser = argparse.ArgumentParser(
        prog="pipeline-client",
        description=DESCRIPTION,
        epilog=EPILOG,
        parents=[common],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_trigger(commands, common)
    _add_job_commands(commands, common)
    _add_queue_commands(commands, common)
    _add_tracking_commands(commands, common)
    return parser
