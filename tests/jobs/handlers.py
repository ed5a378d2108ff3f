"""Task handlers for the jobs tests; runworker subprocesses load them with --handlers tests.jobs.handlers."""

import sys
import threading
import time

from django.db import connection

from jobs.queue.handlers import task


@task("test.echo")
def echo(ctx):
    return {"args": ctx.args, "attempt": ctx.attempt}


@task("test.fail", retry_backoff_sec=0.05)
def fail(ctx):
    raise ValueError(f"boom on attempt {ctx.attempt}")


@task("test.leaky", retry_backoff_sec=0.05)
def leaky(ctx):
    raise ConnectionError("cannot reach postgres://app:hunter2@db/prod with api_key=abc123")


FIXED = threading.Event()  # test.until_fixed fails until a test sets it (workers in threads see it)


@task("test.until_fixed", retry_backoff_sec=0.05)
def until_fixed(ctx):
    if not FIXED.is_set():
        raise RuntimeError("still broken")
    return {"fixed": True}


@task("test.flaky", retry_backoff_sec=0.05)
def flaky(ctx):
    """Fails until attempt ``succeed_on``."""
    if ctx.attempt < ctx.args.get("succeed_on", 2):
        raise RuntimeError("not yet")
    return {"attempt": ctx.attempt}


@task("test.sleep")
def sleep(ctx):
    """Sleeps ``seconds`` in small steps, checking for cancellation; returns when it ran."""
    started = time.time()
    deadline = started + ctx.args.get("seconds", 1.0)
    while time.time() < deadline:
        ctx.check_cancelled()
        time.sleep(min(0.01, max(0.0, deadline - time.time())))
    return {"started": started, "ended": time.time()}


@task("test.subprocess")
def run_child(ctx):
    """Runs a child process that sleeps ``seconds``; cancellation kills it."""
    done = ctx.run_subprocess([sys.executable, "-c", f"import time; time.sleep({float(ctx.args['seconds'])})"])
    return {"returncode": done.returncode}


@task("test.progress")
def progress(ctx):
    for step in range(3):
        ctx.progress({"step": step + 1, "of": 3})
    return "done"


@task("test.unserializable")
def unserializable(ctx):
    return {"when": object()}


@task("test.nan")
def nan(ctx):
    return {"ratio": float("nan")}


@task("test.nul_error", retry_backoff_sec=0.05)
def nul_error(ctx):
    raise ValueError("bad byte \x00 here, and a lone \udc00 surrogate")


@task("test.system_exit", retry_backoff_sec=0.05)
def system_exit(ctx):
    raise SystemExit(3)


@task("test.keyboard_interrupt", retry_backoff_sec=0.05)
def keyboard_interrupt(ctx):
    raise KeyboardInterrupt


class _Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("no message for you")


@task("test.unprintable", retry_backoff_sec=0.05)
def unprintable(ctx):
    raise _Unprintable()


@task("test.chatty")
def chatty(ctx):
    """Reports progress as fast as it can."""
    for step in range(ctx.args.get("steps", 2000)):
        ctx.progress({"step": step + 1})
    return "done"


@task("test.query")
def query(ctx):
    """Holds a database connection for ``seconds`` (a statement that sleeps in the server)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid() FROM pg_sleep(%s)", [ctx.args.get("seconds", 0.1)])
        return {"backend": cursor.fetchone()[0]}
