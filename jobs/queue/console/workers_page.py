"""Every registered worker (``/admin/jobs/worker/``, and the dashboard's table): its host and pid,
alive or dead, when it started and was last seen, the queues it serves with their slots, and the
jobs it runs now, each with its task, queue and since when, read in one statement for the page."""

import uuid

from django.urls import reverse

from jobs.queue import activity, selectors
from jobs.runtime.names import worker_name

RUNNING_SHOWN = 1000  # running jobs on one page at most (the workers' slots hold far fewer)


def workers_view() -> dict:
    """``{"workers": rows, "running_cut": whether more jobs run than the page shows}``."""
    workers = selectors.workers()
    names = {
        worker["worker_id"]: worker_name(uuid.UUID(worker["worker_id"]), hostname=worker["hostname"], pid=worker["pid"])
        for worker in workers
    }
    running = activity.running_jobs(worker_names=list(names.values()), limit=RUNNING_SHOWN + 1)
    by_worker: dict[str, list[dict]] = {}
    for job_id, task, queue, started_at, name in running[:RUNNING_SHOWN]:
        by_worker.setdefault(name, []).append(
            {
                "job_id": job_id,
                "task": task,
                "queue": queue,
                "started_at": started_at,
                "url": reverse("admin:jobs_job_change", args=[job_id]),
            }
        )
    rows = [
        {
            **worker,
            "name": names[worker["worker_id"]],
            "slots": sum(worker["queues"].values()),
            "running": by_worker.get(names[worker["worker_id"]], []),
        }
        for worker in workers
    ]
    return {
        "workers": rows,
        "alive": sum(worker["alive"] for worker in rows),
        "running_cut": len(running) > RUNNING_SHOWN,
        "running_shown": RUNNING_SHOWN,
    }
