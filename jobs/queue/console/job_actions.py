"""What the job page's Retry, Cancel and Delete ask before they act: each says what will change and
how many jobs it touches. The same words in the page's dialog (``data-confirm``) and, without
JavaScript, on a page of their own before the action runs."""

from jobs.queue import selectors, services
from jobs.queue.models import Job, JobDependency
from jobs.queue.states import FINISHED, JobStatus


def _jobs(n: int) -> str:
    return f"{n} job{'' if n == 1 else 's'}"


def _canceled_with_it(dependencies: dict) -> str:
    """The jobs waiting for this one that its end (or deletion) cancels: those without run_anyway."""
    n = sum(1 for linked in dependencies["downstream"] if linked.status not in FINISHED and not linked.run_anyway)
    return f" {_jobs(n)} waiting for it will be canceled too." if n else ""


def retry_question(job: Job) -> str:
    preview = services.job_retry_preview(job_id=job.job_id)
    before, after = preview.max_attempts_before, preview.max_attempts
    limit = f"max_attempts {before} → {after}" if after != before else f"max_attempts stays {after}"
    back = JobDependency.objects.filter(upstream_id=job.job_id, canceled_it=True, job__status=JobStatus.CANCELED)
    brought = back.count()
    again = f" {_jobs(brought)} its end canceled will wait for it again." if brought else ""
    return (
        f"Retry this job? It runs again in queue {job.queue} as run {preview.run}, with up to {preview.attempts} "
        f"attempt{'' if preview.attempts == 1 else 's'} (the job's attempts {preview.first_attempt} to {after}: "
        f"{limit}).{again}"
    )


def cancel_question(job: Job, *, dependencies: dict, attempts) -> str:
    if job.status == JobStatus.RUNNING:
        return (
            f"Ask this running job to stop? Its worker is told at once; the job ends canceled when its handler "
            f"stops ({attempts}).{_canceled_with_it(dependencies)}"
        )
    return f"Cancel this job? It leaves queue {job.queue} at once and will not run.{_canceled_with_it(dependencies)}"


def delete_question(job: Job, *, dependencies: dict) -> str:
    events = selectors.job_event_count(job_id=job.job_id)
    return (
        f"Delete this {job.status} job and its {events} event{'' if events == 1 else 's'}? "
        f"This cannot be undone.{_canceled_with_it(dependencies)}"
    )


def action_questions(job: Job, *, actions, dependencies: dict, attempts) -> dict[str, str]:
    """The question of each of ``actions`` (those the page offers: "retry", "cancel", "delete")."""
    ask = {
        "retry": lambda: retry_question(job),
        "cancel": lambda: cancel_question(job, dependencies=dependencies, attempts=attempts),
        "delete": lambda: delete_question(job, dependencies=dependencies),
    }
    return {action: ask[action]() for action in actions}
