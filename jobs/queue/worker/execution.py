"""Running one job's handler to its outcome, whatever the handler does."""

import time

from jobs.queue import services
from jobs.queue.handlers import FatalError, JobCancelled, JobContext, LeaseLost, Registry
from jobs.queue.states import OutcomeKind
from pipeline_project.db.storable import exception_details, exception_text, json_problem
from pipeline_project.web.arguments import secret_values, text_without_secrets


def run_handler(handlers: Registry, context: JobContext, *, retry_backoff_sec: float) -> services.Outcome | None:
    """Run one job's handler to its outcome; None when the lease was lost (nothing to write).

    Whatever the handler does, the run ends with an outcome; a result PostgreSQL could not store
    is the run's error. A failed run is retried after ``retry_backoff_sec`` (or the handler's
    own backoff) × its attempt.
    """
    job = context.job
    started = time.perf_counter()
    handler = None
    try:
        handler = handlers.get(job.task)
        if handler is None:
            return services.Outcome(
                lease=job.lease,
                kind=OutcomeKind.FATAL,
                error=f"Unknown task {job.task!r}: no handler is registered for it in this worker.",
                details={"known_tasks": handlers.names()},
            )
        context.check_cancelled()
        result = handler.func(context)
        if problem := json_problem(result):
            raise TypeError(f"The handler's result cannot be stored: it {problem}.")
    except LeaseLost:
        return None
    except JobCancelled:
        return services.Outcome(
            lease=job.lease, kind=OutcomeKind.CANCELED, details={"by": "handler"}, progress=context.unwritten_progress()
        )
    except FatalError as exc:
        return failure_outcome(job, exc, kind=OutcomeKind.FATAL, started=started, progress=context.unwritten_progress())
    except BaseException as exc:  # noqa: BLE001 - whatever the handler raises is the run's outcome, recorded
        backoff = handler.retry_backoff_sec if handler and handler.retry_backoff_sec is not None else retry_backoff_sec
        return failure_outcome(
            job,
            exc,
            kind=OutcomeKind.ERROR,
            started=started,
            retry_delay_sec=backoff * job.lease.attempt,
            progress=context.unwritten_progress(),
        )
    return services.Outcome(
        lease=job.lease,
        kind=OutcomeKind.SUCCEEDED,
        result=result,
        duration_ms=(time.perf_counter() - started) * 1000,
        progress=context.unwritten_progress(),
    )


def failure_outcome(
    job: services.ClaimedJob, exc: BaseException, *, kind: str, started: float, **fields
) -> services.Outcome:
    """The outcome of a run that raised, its texts masked and storable as every failure's are
    (``pipeline_project.db.storable``), and without the values of the job's secret args (a handler's
    error may quote one as it is): the job's page and the worker's log show both to operators."""
    secrets = secret_values(job.args)
    details = {name: text_without_secrets(text, secrets) for name, text in exception_details(exc).items()}
    return services.Outcome(
        lease=job.lease,
        kind=kind,
        error=text_without_secrets(exception_text(exc), secrets),
        details=details,
        duration_ms=(time.perf_counter() - started) * 1000,
        **fields,
    )
