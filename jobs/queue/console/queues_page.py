"""Every queue the service has seen, one row each: the queues page shows them (``/admin/jobs/queue/``)
and the dashboard the same rows, compactly. A queue is seen by its jobs (the kept counts), its
operator state (dl_queues), the workers serving it and the jobs that finished in it in the window.

A row: the live workers serving it and their slots, its jobs per status, the jobs that finished in
the window per status (a chart), the last hour's wait and run times, whether it is paused (the
button says how many queued jobs a pause holds back), its limits as they stand (a form on demand,
filled with them), and a warning when queued jobs wait on a queue no live worker serves."""

from dataclasses import dataclass

from django.urls import reverse
from django.utils.http import urlencode

from jobs.queue import activity, selectors
from jobs.queue.console import charts
from jobs.queue.states import JobStatus


@dataclass(frozen=True)
class Permissions:
    can_pause: bool
    can_limit: bool


def queues_view(*, window: charts.Window, permissions: Permissions, back_to: str) -> dict:
    """The queues' rows and the chart of all queues together, read in the caller's snapshot;
    ``back_to``: the page the rows' buttons come back to."""
    buckets = charts.Buckets.now(window)
    finished = buckets.finished()
    queues = {queue["name"]: queue for queue in selectors.queues()}
    workers = selectors.workers()
    served = {name for worker in workers for name in worker["queues"]}
    times = activity.run_times()
    widest = max((sum(queue["depth"].values()) for queue in queues.values()), default=0) or 1
    rows = [
        _row(
            name,
            queues.get(name),
            workers=[worker for worker in workers if worker["alive"] and name in worker["queues"]],
            chart=charts.chart(buckets, finished.get(name, {}), intervals=1),
            times=times.get(name, {}),
            widest=widest,
        )
        for name in sorted(set(queues) | served | set(finished))
    ]
    return {
        "queues": rows,
        "throughput": charts.chart(buckets, charts.summed(finished)),
        "window": window,
        "windows": [{"window": w, "url": "?" + urlencode({"window": w.name})} for w in charts.WINDOWS.values()],
        "permissions": permissions,
        "back_to": back_to,
    }


def _row(name, queue, *, workers, chart, times, widest) -> dict:
    depth = queue["depth"] if queue else {}
    queued, running = depth.get(JobStatus.QUEUED, 0), depth.get(JobStatus.RUNNING, 0)
    paused = bool(queue and queue["paused"])
    return {
        "name": name,
        "jobs_url": reverse("admin:jobs_job_changelist") + "?" + urlencode({"queue": name}),
        "paused": paused,
        "workers": len(workers),
        "slots": sum(worker["queues"][name] for worker in workers),
        "unserved": _unserved(queued) if queued and not workers else "",
        "total": sum(depth.values()),
        "segments": [
            {"status": status, "count": depth[status], "percent": round(100 * depth[status] / widest, 2)}
            for status in JobStatus.values
            if depth.get(status)
        ],
        "chart": chart,
        "wait": times.get("wait"),
        "run": times.get("run"),
        "limits": _limits(queue, running),
        "change_url": reverse("admin:jobs_job_queue_change", args=[name, "resume" if paused else "pause"]),
        "change_confirm": _change_confirm(name, paused=paused, queued=queued, running=running),
        "limits_url": reverse("admin:jobs_job_queue_limits", args=[name]),
    }


def _jobs(count: int, what: str = "job") -> str:
    return f"{count} {what}{'' if count == 1 else 's'}"


def _unserved(queued: int) -> str:
    return f"No worker serves this queue: {_jobs(queued)} {'waits' if queued == 1 else 'wait'}."


def _change_confirm(name: str, *, paused: bool, queued: int, running: int) -> str:
    """What the pause or resume button's question says: the jobs it holds back or lets go."""
    if paused:
        return f"Resume {name}? Workers claim its {_jobs(queued, 'queued job')} again."
    stay = "stays" if queued == 1 else "stay"
    finish = "finishes" if running == 1 else "finish"
    return (
        f"Pause {name}? Its {_jobs(queued, 'queued job')} {stay} queued until it is resumed; "
        f"its {_jobs(running, 'running job')} {finish}."
    )


def _limits(queue: dict | None, running: int) -> dict:
    """The limits as they stand ("max 2 running · 10 per 60 s · per partition", or "no limits"),
    what they count now, and the form's values."""
    queue = queue or {"max_running": None, "rate_limit": None, "rate_period_sec": None, "per_partition": False}
    max_running, rate_limit, period = queue["max_running"], queue["rate_limit"], queue["rate_period_sec"]
    parts = [f"max {max_running} running"] if max_running else []
    parts += [f"{rate_limit} per {period} s"] if rate_limit else []
    now = [f"{running} running"] if max_running else []
    now += [f"{queue['started_in_period']} started in the last {period} s"] if rate_limit else []
    return {
        "text": " · ".join(parts + (["per partition"] if parts and queue["per_partition"] else [])) or "no limits",
        "now": ", ".join(now),
        "max_running": max_running,
        "rate_limit": rate_limit,
        "rate_period_sec": period,
        "per_partition": queue["per_partition"],
    }
