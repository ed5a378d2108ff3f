"""Where the database-state engine lives: show it, or record this host as its home."""

from django.core.management.base import BaseCommand, CommandError

from jobs.dbstates.engine import placement


class Command(BaseCommand):
    help = (
        "Show where the database-state engine lives (the host and state store recorded in the database, "
        "and this host's), or `adopt`: record this host and its state store as the engine's, after the "
        "engine moved here with its store or its host was renamed. Workers serving SQLRS_QUEUE elsewhere "
        "refuse to start."
    )

    def add_arguments(self, parser):
        parser.add_argument("action", nargs="?", choices=["show", "adopt"], default="show")

    def handle(self, *args, action, **options):
        if action == "adopt":
            try:
                before, now = placement.engine_adopt()
            except ValueError as exc:
                raise CommandError(str(exc)) from None
            self.stdout.write(f"the engine is {now} (it was {before or 'not recorded'})")
            return
        engine = placement.engine_place()
        self.stdout.write(f"engine: {engine or 'not recorded yet (the first worker serving its queue records it)'}")
        self.stdout.write(f"here:   {placement.here()}")
