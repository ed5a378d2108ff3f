import re
from dataclasses import asdict

from django.core.management.base import BaseCommand, CommandError

from jobs.queue import selectors, services
from pipeline_project.api.errors import ApplicationError

RATE = re.compile(r"^(\d+)/(\d+)s?$")


class Command(BaseCommand):
    help = (
        "List queues, pause and resume one (every runworker stops or starts claiming from it at once), "
        "or set its limits."
    )

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        sub.add_parser("list", help="Queues with their depth by status, whether they are paused, and their limits.")
        pause = sub.add_parser("pause", help="Pause a queue.")
        sub.add_parser("resume", help="Resume a queue.").add_argument("queue")
        limit = sub.add_parser("limit", help="Set a queue's limits; with no option, clear them.")
        for creating in (pause, limit):
            creating.add_argument("queue")
            creating.add_argument("--create", action="store_true", help="Even if nothing names the queue yet.")
        limit.add_argument("--max-running", type=int, help="At most N of its jobs running, across all workers.")
        limit.add_argument("--rate", help="At most N of its jobs started per T seconds: N/T, e.g. 10/60s.")
        limit.add_argument("--per-partition", action="store_true", help="The limits hold per partition_key.")

    def handle(self, *args, action, **options):
        if action == "list":
            for queue in selectors.queues():
                depth = ", ".join(f"{status} {count}" for status, count in queue["depth"].items()) or "empty"
                state = "PAUSED" if queue["paused"] else "active"
                self.stdout.write(f"{queue['name']}\t{state}\t{depth}\t{_limits_text(queue)}".rstrip())
            return
        try:
            if action == "limit":
                self._limit(options)
                return
            if action == "pause":
                changed = services.queue_pause(queue=options["queue"], by="manage.py", create=options["create"])
            else:
                changed = services.queue_resume(queue=options["queue"], by="manage.py")
        except ApplicationError as exc:
            raise CommandError(f"{exc.message} {exc.details}" if exc.details else exc.message) from None
        state = "paused" if action == "pause" else "resumed"
        self.stdout.write(f"{options['queue']}: {state}" if changed else f"{options['queue']}: already {state}")

    def _limit(self, options) -> None:
        rate_limit = rate_period_sec = None
        if options["rate"] is not None:
            if not (match := RATE.match(options["rate"])):
                raise CommandError("--rate: N/T, e.g. 10/60s (at most N started per T seconds).")
            rate_limit, rate_period_sec = int(match[1]), int(match[2])
        limits = services.queue_limits_set(
            queue=options["queue"],
            by="manage.py",
            max_running=options["max_running"],
            rate_limit=rate_limit,
            rate_period_sec=rate_period_sec,
            per_partition=options["per_partition"],
            create=options["create"],
        )
        self.stdout.write(f"{limits.queue}: {_limits_text(asdict(limits)) or 'no limits'}")


def _limits_text(limits: dict) -> str:
    """``max 3 running, 10/60s started, per partition`` (empty: no limits)."""
    parts = []
    if limits["max_running"] is not None:
        parts.append(f"max {limits['max_running']} running")
    if limits["rate_limit"] is not None:
        started = limits.get("started_in_period")
        parts.append(
            f"{limits['rate_limit']}/{limits['rate_period_sec']}s started"
            + (f" ({started} in the last period)" if started is not None else "")
        )
    if parts and limits["per_partition"]:
        parts.append("per partition")
    return ", ".join(parts)
