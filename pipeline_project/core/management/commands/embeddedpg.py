from django.core.management.base import BaseCommand, CommandError

from pipeline_project.db import embedded as embedded_postgres


class Command(BaseCommand):
    help = "Manage the embedded PostgreSQL in var/postgres (used when DATABASE_URL is not set)."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["status", "start", "stop", "restart", "url"])

    def handle(self, *args, action, **options):
        if action == "status":
            running = embedded_postgres.is_running()
            self.stdout.write(
                f"embedded PostgreSQL in {embedded_postgres.DATA_DIR}: {'running' if running else 'stopped'}"
            )
        elif action == "start":
            self.stdout.write(f"running; socket in {embedded_postgres.start()}")
        elif action == "stop":
            self.stdout.write("stopped" if embedded_postgres.stop() else "was not running")
        elif action == "restart":
            if not embedded_postgres.is_running():
                raise CommandError("the embedded server is not running")
            embedded_postgres.pg_ctl("-w", "-m", "fast", "restart")
            self.stdout.write("restarted")
        else:
            host = embedded_postgres.start()
            for name in (embedded_postgres.DEFAULT_DATABASE, embedded_postgres.PIPELINE_DATABASE):
                self.stdout.write(f"postgresql://postgres@/{name}?host={host}")
