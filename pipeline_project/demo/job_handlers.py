"""The demo's tasks on the job queue: ones that succeed, fail, fail and then succeed on a retry,
and the schedule's tick that moves the demo's tracked files through their stages."""

import time

from jobs.queue.handlers import FatalError, task
from pipeline_project.demo import tracking


@task("demo.work")
def work(ctx):
    """Succeeds after ``seconds`` (long enough to be seen running)."""
    seconds = float(ctx.args.get("seconds", 1))
    for step in range(int(seconds * 4)):
        ctx.check_cancelled()
        ctx.progress({"step": step + 1})
        time.sleep(0.25)
    return {"rows": int(ctx.args.get("rows", 100))}


@task("demo.flaky", retry_backoff_sec=3)
def flaky(ctx):
    """Fails until attempt ``succeed_on_attempt``: the queue retries it with a backoff."""
    if ctx.job.lease.attempt < int(ctx.args.get("succeed_on_attempt", 3)):
        raise ConnectionError(f"the demo's upstream is down (attempt {ctx.job.lease.attempt}); retrying")
    return {"attempt": ctx.job.lease.attempt}


@task("demo.broken", retry_backoff_sec=2)
def broken(ctx):
    """Always fails; ``fatal`` ends it at once, otherwise its attempts run out."""
    if ctx.args.get("fatal"):
        raise FatalError("the demo's bad input: another attempt cannot help")
    raise RuntimeError("the demo's failing task fails on every attempt")


@task("demo.tracking-tick")
def tracking_tick(ctx):
    """The demo schedule's task: one step of the demo's tracked files through their stages."""
    return tracking.tracking_advance()
