import os
import signal

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from prometheus_client import multiprocess, start_http_server

from jobs.handlers_loader import load_handler_modules
from jobs.registry import registry
from jobs.worker import WorkerConfig, build_worker, parse_workers, parse_workers_json, queue_flag_entry


class Command(BaseCommand):
    help = (
        "Run jobs from dl_jobs. Queues and concurrency come from --queue flags or WORKERS_JSON "
        '(default [{"queue": "default", "concurrency": 4}]). SIGTERM/SIGINT: stop claiming, give '
        "running jobs DL_SHUTDOWN_TIMEOUT_SEC to finish, put the rest back in the queue, exit 0."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--queue",
            action="append",
            metavar="NAME[:CONCURRENCY]",
            help="A queue to run (repeatable); overrides WORKERS_JSON.",
        )
        parser.add_argument(
            "--handlers", action="append", default=[], metavar="MODULE", help="Extra handler module to import."
        )
        parser.add_argument("--metrics-port", type=int, help="Serve this process's Prometheus metrics on this port.")
        parser.add_argument("--metrics-addr", default="127.0.0.1")
        parser.add_argument("--no-reaper", action="store_true", help="Leave reaping to `manage.py runreaper`.")
        parser.add_argument("--shutdown-timeout", type=float, help="Seconds running jobs get after SIGTERM.")

    def handle(self, *args, **options):
        queues = self._queues(options["queue"])
        load_handler_modules(options["handlers"])
        overrides = {"run_reaper": not options["no_reaper"]}
        if options["shutdown_timeout"] is not None:
            overrides["shutdown_timeout_sec"] = options["shutdown_timeout"]
        worker = build_worker(WorkerConfig.from_settings(queues, **overrides), registry)

        if options["metrics_port"]:
            start_http_server(options["metrics_port"], addr=options["metrics_addr"])
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: worker.request_stop())
        try:
            worker.run()
        finally:
            if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
                multiprocess.mark_process_dead(os.getpid())  # its live gauges leave /metrics with it

    def _queues(self, flags: list[str] | None) -> dict[str, int]:
        source = "--queue" if flags else "WORKERS_JSON"
        try:
            if flags:
                return parse_workers([queue_flag_entry(flag) for flag in flags])
            return parse_workers_json(settings.WORKERS_JSON)
        except ValueError as exc:
            raise CommandError(f"{source}: {exc}") from None
