"""The database-state servers running under this checkout's state store: list them, or stop them."""

from django.core.management.base import BaseCommand, CommandError

from jobs.dbstates.engine import servers, statefs


class Command(BaseCommand):
    help = (
        "List the database-state servers running under the state store (SQLRS_STATE_STORE: instances, "
        "prepare jobs' runtimes), or `stop` them: a fast shutdown each (a clean stop; an instance comes "
        "back from its data directory when a run asks for it). `make db-stop` runs `stop`."
    )
    requires_system_checks = []  # works on the state store alone: no database is needed

    def add_arguments(self, parser):
        parser.add_argument("action", nargs="?", choices=["list", "stop"], default="list")
        parser.add_argument(
            "--timeout",
            type=float,
            default=servers.STORE_STOP_TIMEOUT_SEC,
            help="Seconds to wait for the servers to stop (they are left shutting down after).",
        )

    def handle(self, *args, action, timeout, **options):
        if action == "list":
            data_dirs = servers.store_server_dirs()
            for data_dir in data_dirs:
                self.stdout.write(str(data_dir))
            if not data_dirs:
                self.stdout.write(f"no database-state server runs under {statefs.root()}")
            return
        result = servers.store_servers_stop(timeout_sec=timeout)
        if not result["stopped"] and not result["left"]:
            self.stdout.write(f"no database-state server was running under {statefs.root()}")
            return
        self.stdout.write(f"stopped {result['stopped']} database-state server(s) under {statefs.root()}")
        if result["left"]:
            raise CommandError(f"{result['left']} still shutting down after {timeout:g} s")
