import os

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from prometheus_client import multiprocess, start_http_server

from jobs.queue.handlers import registry
from jobs.runtime import registry as kinds
from jobs.runtime.build import build_worker
from jobs.runtime.config import WorkerConfig, Workers, parse_workers, parse_workers_json, worker_flag_entry
from jobs.runtime.registry import StartRefused
from jobs.runtime.stopping import stopping_on_signals
from pipeline_project.process_memory import startup_objects_freeze


class Command(BaseCommand):
    help = (
        "Run every kind of background work the apps register: jobs of queues, tasks of process "
        "namespaces. What to serve and its concurrency come from the kinds' flags (--queue, "
        '--namespace) or WORKERS_JSON (default [{"queue": "default", "concurrency": 4}]). '
        "SIGTERM/SIGINT: stop claiming, give running work DL_SHUTDOWN_TIMEOUT_SEC to finish, put the "
        "rest back, stop the database-state servers this process started, exit 0."
    )

    def add_arguments(self, parser):
        for kind in kinds.source_kinds():
            parser.add_argument(
                f"--{kind}",
                action="append",
                default=[],
                metavar="NAME[:CONCURRENCY]",
                help=f"A {kind} to serve (repeatable); with the other kinds' flags, overrides WORKERS_JSON.",
            )
        for flag, (_loader, help_text) in kinds.module_options().items():
            parser.add_argument(f"--{flag}", action="append", default=[], metavar="MODULE", help=help_text)
        parser.add_argument("--metrics-port", type=int, help="Serve this process's Prometheus metrics on this port.")
        parser.add_argument("--metrics-addr", default="127.0.0.1")
        parser.add_argument(
            "--no-reaper",
            action="store_true",
            help="Leave the housekeeping periodic tasks to `manage.py runreaper` (tasks local to what this "
            "worker serves, such as the database-state engine's, still run here).",
        )
        parser.add_argument("--shutdown-timeout", type=float, help="Seconds running work gets after SIGTERM.")

    def handle(self, *args, **options):
        for flag, (load_modules, _help) in kinds.module_options().items():
            load_modules(options[flag])
        workers = self._workers({kind: options[kind] for kind in kinds.source_kinds()})
        overrides = {"run_reaper": not options["no_reaper"]}
        if options["shutdown_timeout"] is not None:
            overrides["shutdown_timeout_sec"] = options["shutdown_timeout"]
        try:
            worker = build_worker(WorkerConfig.from_settings(workers.serves, **overrides), registry)
        except (LookupError, StartRefused) as exc:
            raise CommandError(str(exc)) from None

        startup_objects_freeze(templates=False)
        if options["metrics_port"]:
            start_http_server(options["metrics_port"], addr=options["metrics_addr"])
        try:
            with stopping_on_signals(worker.request_stop, at_exit=kinds.run_exit_hooks):
                worker.run()
        finally:
            if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
                multiprocess.mark_process_dead(os.getpid())  # its live gauges leave /metrics with it

    def _workers(self, flags_by_kind: dict[str, list[str]]) -> Workers:
        flags = [(kind, flag) for kind, given in flags_by_kind.items() for flag in given]
        source = "/".join(f"--{kind}" for kind in dict.fromkeys(kind for kind, _flag in flags)) or "WORKERS_JSON"
        try:
            if flags:
                return parse_workers([worker_flag_entry(kind, flag) for kind, flag in flags])
            return parse_workers_json(settings.WORKERS_JSON)
        except ValueError as exc:
            raise CommandError(f"{source}: {exc}") from None
