"""Run the web server and a job worker in the foreground: what ``make run`` does.

Ctrl-C (or SIGTERM) stops both cleanly and the command exits 0 without a word. From a
terminal, the command first makes its own process group the terminal's foreground group, so
that Ctrl-C reaches it and its children only, and not ``make``, which would otherwise report
the interrupt as an error; the terminal is given back on exit.
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from contextlib import contextmanager, suppress

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

STOP_TIMEOUT_SEC = 40  # the worker's shutdown timeout (30 s by default) and some
COMMANDS = {
    "web": [
        os.path.join(os.path.dirname(sys.executable), "gunicorn"),
        "-c",
        "pipeline_project/gunicorn_conf.py",
        "pipeline_project.asgi:application",
    ],
    "worker": [sys.executable, "manage.py", "runworker"],
}


class Command(BaseCommand):
    help = "Run the web server and a job worker until Ctrl-C or SIGTERM (what `make run` does)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--write-engine-json",
            metavar="PATH",
            help="Write the database-state engine's discovery file for a sqlrs CLI there (endpoint, pid, token).",
        )

    def handle(self, *args, write_engine_json=None, **options):
        stop = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
        metrics_dir = tempfile.mkdtemp(prefix="pipeline-metrics-")
        env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": metrics_dir}  # /metrics sums both processes
        if "WORKERS_JSON" not in os.environ:  # the worker serves `manage.py demo`'s queues and namespace too
            env["WORKERS_JSON"] = settings.RUNSERVICE_WORKERS_JSON
        bind = os.environ.get("WEB_BIND", "127.0.0.1:8000")
        self.stdout.write(f"Web server on http://{bind}, and a job worker; Ctrl-C stops both.")
        try:
            with terminal_foreground():
                # Each child in a process group of its own: Ctrl-C reaches this command, which stops them in order.
                children = {
                    name: subprocess.Popen(command, cwd=settings.BASE_DIR, env=env, process_group=0)
                    for name, command in COMMANDS.items()
                }
                if write_engine_json:  # the database-state engine's command (jobs.dbstates)
                    call_command("writeenginejson", write_engine_json, endpoint=f"http://{bind}/sqlrs", pid=os.getpid())
                while not stop.wait(0.2) and all(child.poll() is None for child in children.values()):
                    pass
                crashed = [name for name, child in children.items() if child.poll() is not None]
                for child in children.values():
                    if child.poll() is None:
                        child.send_signal(signal.SIGTERM)
                for child in children.values():
                    try:
                        child.wait(timeout=STOP_TIMEOUT_SEC)
                    except subprocess.TimeoutExpired:
                        child.kill()
                        child.wait()
        finally:
            shutil.rmtree(metrics_dir, ignore_errors=True)
        if crashed:
            codes = ", ".join(f"{name} (exit status {children[name].returncode})" for name in crashed)
            raise CommandError(f"stopped because {codes} ended")


@contextmanager
def terminal_foreground():
    """Make this process's own group the foreground of its terminal, if it has one."""
    if not os.isatty(0):
        yield
        return
    previous = os.tcgetpgrp(0)
    with suppress(PermissionError):  # a session leader already leads its own group
        os.setpgid(0, 0)
    _set_foreground(os.getpgrp())
    try:
        yield
    finally:
        _set_foreground(previous)


def _set_foreground(group: int) -> None:
    # A background group changing the terminal's foreground gets SIGTTOU unless it ignores it.
    previous = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        os.tcsetpgrp(0, group)
    except OSError:  # the terminal went away
        pass
    finally:
        signal.signal(signal.SIGTTOU, previous)
