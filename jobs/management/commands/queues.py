from django.core.management.base import BaseCommand, CommandError

from jobs import selectors, services
from pipeline_project.core.errors import ApplicationError


class Command(BaseCommand):
    help = "List queues, or pause and resume one (every runworker stops or starts claiming from it at once)."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        sub.add_parser("list", help="Queues with their depth by status and whether they are paused.")
        for action in ("pause", "resume"):
            sub.add_parser(action, help=f"{action.capitalize()} a queue.").add_argument("queue")

    def handle(self, *args, action, **options):
        if action == "list":
            for queue in selectors.queues():
                depth = ", ".join(f"{status} {count}" for status, count in queue["depth"].items()) or "empty"
                self.stdout.write(f"{queue['name']}\t{'PAUSED' if queue['paused'] else 'active'}\t{depth}")
            return
        change = services.queue_pause if action == "pause" else services.queue_resume
        try:
            changed = change(queue=options["queue"], by="manage.py")
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        state = "paused" if action == "pause" else "resumed"
        self.stdout.write(f"{options['queue']}: {state}" if changed else f"{options['queue']}: already {state}")
