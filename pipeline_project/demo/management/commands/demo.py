from django.core.management.base import BaseCommand, CommandError

from pipeline_project.api.errors import ApplicationError
from pipeline_project.demo import config, services


class Command(BaseCommand):
    help = (
        "Fill the service with a living example (a source and its run on a website the service serves "
        "itself, jobs, a schedule, processes, tracked files, a database state); idempotent. "
        "--remove takes exactly that away."
    )

    def add_arguments(self, parser):
        parser.add_argument("--remove", action="store_true", help="Delete everything the demo made, and nothing else.")
        parser.add_argument(
            "--base-url",
            default=config.DEFAULT_BASE_URL,
            help="Where the service runs, for the demo source's start page (default: %(default)s, `make run`'s).",
        )

    def handle(self, *args, remove=False, base_url=None, **options):
        try:
            outcome = services.demo_remove() if remove else services.demo_install(base_url=base_url)
        except ApplicationError as exc:
            raise CommandError(str(exc)) from None
        verb = "removed" if remove else "created"
        done = ", ".join(f"{what}: {count}" for what, count in outcome.counts.items())
        self.stdout.write(f"Demo {verb} ({done}).")
        for note in outcome.notes:
            self.stdout.write(note)
        if not remove:
            self.stdout.write(
                f"Open {base_url.rstrip('/')}/pipeline/ (the run), /admin/jobs/ (the demo-* queues) and "
                f"/admin/processes/process/; the worker of `make run` runs it all."
            )
