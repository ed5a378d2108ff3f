import os

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from prometheus_client import multiprocess, start_http_server

from jobs.handlers_loader import load_handler_modules
from jobs.processes.registry import load_processor_modules
from jobs.registry import registry
from jobs.runtime.build import build_worker
from jobs.runtime.config import WorkerConfig, Workers, parse_workers, parse_workers_json, worker_flag_entry
from jobs.runtime.registry import StartRefused
from jobs.runtime.stopping import stopping_on_signals


class Command(BaseCommand):
    help = (
        "Run jobs from dl_jobs and tasks of process namespaces. Queues, namespaces and their "
        "concurrency come from --queue/--namespace flags or WORKERS_JSON (default "
        '[{"queue": "default", "concurrency": 4}]). SIGTERM/SIGINT: stop claiming, give running '
        "work DL_SHUTDOWN_TIMEOUT_SEC to finish, put the rest back, exit 0."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--queue",
            action="append",
            metavar="NAME[:CONCURRENCY]",
            help="A queue to run (repeatable); with --namespace, overrides WORKERS_JSON.",
        )
        parser.add_argument(
            "--namespace",
            action="append",
            metavar="NAME[:CONCURRENCY]",
            help="A process namespace to run (repeatable); with --queue, overrides WORKERS_JSON.",
        )
        parser.add_argument(
            "--handlers", action="append", default=[], metavar="MODULE", help="Extra handler module to import."
        )
        parser.add_argument(
            "--processors", action="append", default=[], metavar="MODULE", help="Extra processor module to import."
        )
        parser.add_argument("--metrics-port", type=int, help="Serve this process's Prometheus metrics on this port.")
        parser.add_argument("--metrics-addr", default="127.0.0.1")
        parser.add_argument(
            "--no-reaper",
            action="store_true",
            help="Leave the housekeeping periodic tasks to `manage.py runreaper` (tasks local to what this "
            "worker serves, such as the database-state engine's, still run here).",
        )
        parser.add_argument("--shutdown-timeout", type=float, help="Seconds running jobs get after SIGTERM.")

    def handle(self, *args, **options):
        load_handler_modules(options["handlers"])
        load_processor_modules(options["processors"])
        workers = self._workers(options["queue"] or [], options["namespace"] or [])
        overrides = {"run_reaper": not options["no_reaper"], "serves": workers.serves}
        if options["shutdown_timeout"] is not None:
            overrides["shutdown_timeout_sec"] = options["shutdown_timeout"]
        try:
            worker = build_worker(WorkerConfig.from_settings({}, **overrides), registry)
        except (LookupError, StartRefused) as exc:
            raise CommandError(str(exc)) from None

        if options["metrics_port"]:
            start_http_server(options["metrics_port"], addr=options["metrics_addr"])
        try:
            with stopping_on_signals(worker.request_stop):
                worker.run()
        finally:
            if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
                multiprocess.mark_process_dead(os.getpid())  # its live gauges leave /metrics with it

    def _workers(self, queues: list[str], namespaces: list[str]) -> Workers:
        flags = [("queue", flag) for flag in queues] + [("namespace", flag) for flag in namespaces]
        source = "/".join(f"--{kind}" for kind in dict.fromkeys(kind for kind, _flag in flags)) or "WORKERS_JSON"
        try:
            if flags:
                return parse_workers([worker_flag_entry(kind, flag) for kind, flag in flags])
            return parse_workers_json(settings.WORKERS_JSON)
        except ValueError as exc:
            raise CommandError(f"{source}: {exc}") from None
