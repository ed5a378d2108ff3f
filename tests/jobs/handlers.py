"""Task handlers for the jobs tests; runworker subprocesses load them with --handlers tests.jobs.handlers."""

import time

from jobs.registry import task


@task("test.echo")
def echo(ctx):
    return {"args": ctx.args, "attempt": ctx.attempt}


@task("test.fail", retry_backoff_sec=0.05)
def fail(ctx):
    raise ValueError(f"boom on attempt {ctx.attempt}")


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


@task("test.progress")
def progress(ctx):
    for step in range(3):
        ctx.progress({"step": step + 1, "of": 3})
    return "done"


@task("test.unserializable")
def unserializable(ctx):
    return {"when": object()}
