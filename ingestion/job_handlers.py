"""The pipeline's tasks on the job queue: discover, download, ocr (seed 004's task names; its
periodic task: ``ingestion.worker``)."""

from ingestion import services, steps
from ingestion.stopping import Stopped
from jobs.queue.handlers import FatalError, JobCancelled, task


def _run_step(ctx, name: str, work):
    """``work(step)`` for the job's step, stopped by the job's signals (a canceled job's fetches
    are cut off and its subprocesses killed). A step that cannot succeed fails the job at once;
    one whose run was canceled ends it canceled."""
    try:
        return work(steps.step_of(ctx.args, name, ctx.job_id, stop=ctx.signals.stopped, run=ctx.run_subprocess))
    except (Stopped, services.RunCanceled) as exc:
        ctx.check_cancelled()  # this job's own cancel, or its lease lost, says how it ends
        raise JobCancelled(str(exc)) from None  # its run was canceled: its jobs are being canceled with it
    except (steps.StepFailed, KeyError) as exc:
        raise FatalError(str(exc)) from None


@task("discover")
def discover(ctx):
    return _run_step(ctx, "discover", lambda step: steps.discover(step=step))


@task("download")
def download(ctx):
    return _run_step(ctx, "download", lambda step: steps.download(step=step, url=ctx.args["url"]))


@task("ocr")
def ocr(ctx):
    return _run_step(ctx, "ocr", lambda step: steps.ocr(step=step, url=ctx.args["url"], path=ctx.args["path"]))
