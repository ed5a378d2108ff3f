"""Built-in handlers: useful for smoke tests, demos and benchmarks."""

from jobs.queue.handlers import FatalError, task


@task("jobs.noop")
def noop(ctx):
    """Does nothing (benchmarks measure the queue itself with it)."""


@task("jobs.echo")
def echo(ctx):
    """Returns its args."""
    return ctx.args


SLEEP_LIMITS = {"seconds": (0.0, 24 * 3600.0), "chunk": (0.01, 3600.0)}


def _number_arg(ctx, name: str, default: float) -> float:
    value = ctx.args.get(name, default)
    low, high = SLEEP_LIMITS[name]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise FatalError(f"args.{name} must be a number from {low} to {high}, not {value!r}")
    return float(value)


@task("jobs.sleep")
def sleep(ctx):
    """Sleeps ``seconds`` in ``chunk`` steps, reporting progress and honouring cancellation."""
    seconds = _number_arg(ctx, "seconds", 1.0)
    chunk = _number_arg(ctx, "chunk", 0.1)
    slept = 0.0
    while slept < seconds:
        ctx.check_cancelled()
        ctx.signals.stopped.wait(min(chunk, seconds - slept))  # a cancel ends the wait at once
        slept += chunk
        ctx.progress({"slept": round(min(slept, seconds), 3), "of": seconds})
    return {"slept": seconds}
