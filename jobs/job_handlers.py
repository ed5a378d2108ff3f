"""Built-in handlers: useful for smoke tests, demos and benchmarks."""

import time

from jobs.registry import task


@task("jobs.noop")
def noop(ctx):
    """Does nothing (benchmarks measure the queue itself with it)."""


@task("jobs.echo")
def echo(ctx):
    """Returns its args."""
    return ctx.args


@task("jobs.sleep")
def sleep(ctx):
    """Sleeps ``seconds`` in ``chunk`` steps, reporting progress and honouring cancellation."""
    seconds = float(ctx.args.get("seconds", 1))
    chunk = float(ctx.args.get("chunk", 0.1))
    slept = 0.0
    while slept < seconds:
        ctx.check_cancelled()
        time.sleep(min(chunk, seconds - slept))
        slept += chunk
        ctx.progress({"slept": round(min(slept, seconds), 3), "of": seconds})
    return {"slept": seconds}
