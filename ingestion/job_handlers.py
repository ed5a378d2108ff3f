"""The pipeline's tasks on the job queue: discover, download, ocr (seed 004's task names)."""

from django.conf import settings

from ingestion import pipeline
from jobs.registry import FatalError, task
from jobs.runtime.periodic import PeriodicTask, register_periodic


def _run_step(ctx, name: str, work):
    """``work(step)`` for the job's step; a step that cannot succeed fails the job at once."""
    try:
        return work(pipeline.step_of(ctx.args, name, ctx.job_id))
    except (pipeline.StepFailed, KeyError) as exc:
        raise FatalError(str(exc)) from None


@task("discover")
def discover(ctx):
    return _run_step(ctx, "discover", lambda step: pipeline.discover(step=step))


@task("download")
def download(ctx):
    return _run_step(
        ctx, "download", lambda step: pipeline.download(step=step, url=ctx.args["url"], label=ctx.args.get("label"))
    )


@task("ocr")
def ocr(ctx):
    # ctx.run_subprocess: a canceled job kills its Tesseract.
    return _run_step(
        ctx,
        "ocr",
        lambda step: pipeline.ocr(
            step=step, url=ctx.args["url"], path=ctx.args["path"], label=ctx.args.get("label"), run=ctx.run_subprocess
        ),
    )


register_periodic(
    lambda: [PeriodicTask("ingestion.settle", settings.INGESTION_SETTLE_PERIOD_SEC, pipeline.runs_settle)]
)
