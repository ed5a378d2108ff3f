"""The jobs dashboard's data, shaped for its CSS charts: per queue, depth by status, the last
hour's throughput and failures per minute, wait and run times; workers alive or dead."""

from datetime import UTC, timedelta

from django.urls import reverse
from django.utils import timezone

from jobs.queue import selectors
from jobs.queue.models import JobStatus

MINUTES = 60
AXIS_LABEL_EVERY_MINUTES = 15


def context(*, can_pause: bool, can_limit: bool) -> dict:
    activity = selectors.queue_activity(minutes=MINUTES)
    queues = selectors.queues()
    names = sorted({queue["name"] for queue in queues} | set(activity))
    by_name = {queue["name"]: queue for queue in queues}
    widest = max((sum(queue["depth"].values()) for queue in queues), default=0) or 1
    rows = [_queue_row(name, by_name.get(name), activity.get(name), widest) for name in names]
    throughput = _columns(_totals_per_minute(activity))
    return {
        "queues": rows,
        "workers": selectors.workers(),
        "throughput": throughput,
        "minutes": MINUTES,
        "succeeded_total": sum(column["succeeded"] for column in throughput),
        "failed_total": sum(column["failed"] for column in throughput),
        "can_pause": can_pause,
        "can_limit": can_limit,
    }


def _queue_row(name: str, queue: dict | None, activity: dict | None, widest: int) -> dict:
    depth = queue["depth"] if queue else {}
    per_minute = activity["per_minute"] if activity else {}
    paused = bool(queue and queue["paused"])
    return {
        "name": name,
        "paused": paused,
        "change_url": reverse("admin:jobs_job_queue_change", args=[name, "resume" if paused else "pause"]),
        "limits_url": reverse("admin:jobs_job_queue_limits", args=[name]),
        "limits": _limits(queue, depth),
        "total": sum(depth.values()),
        "segments": [
            {"status": status, "count": depth[status], "percent": round(100 * depth[status] / widest, 2)}
            for status in JobStatus.values
            if depth.get(status)
        ],
        "succeeded": sum(minute["succeeded"] for minute in per_minute.values()),
        "failed": sum(minute["failed"] for minute in per_minute.values()),
        "minutes": _columns(per_minute),
        "wait": activity["wait"] if activity else None,
        "run": activity["run"] if activity else None,
    }


def _limits(queue: dict | None, depth: dict) -> dict | None:
    """A limited queue's limits beside what they count: jobs running, started in the rate period."""
    if not queue or (queue["max_running"] is None and queue["rate_limit"] is None):
        return None
    return {
        **{key: queue[key] for key in ("max_running", "rate_limit", "rate_period_sec", "per_partition")},
        "running": depth.get(JobStatus.RUNNING, 0),
        "started": queue["started_in_period"],
    }


def _totals_per_minute(activity: dict[str, dict]) -> dict:
    totals: dict = {}
    for queue in activity.values():
        for minute, counts in queue["per_minute"].items():
            column = totals.setdefault(minute, {"succeeded": 0, "failed": 0})
            column["succeeded"] += counts["succeeded"]
            column["failed"] += counts["failed"]
    return totals


def _columns(per_minute: dict) -> list[dict]:
    """One column per minute of the window, quiet minutes included, so the time axis is even."""
    this_minute = timezone.now().replace(second=0, microsecond=0)
    first = this_minute - timedelta(minutes=MINUTES)
    # A database clock slightly ahead of ours may report a minute past our "now".
    last = max([this_minute, *per_minute])
    window = [
        {"minute": minute, "succeeded": 0, "failed": 0, **per_minute.get(minute, {})}
        for minute in (
            first + timedelta(minutes=offset) for offset in range((last - first) // timedelta(minutes=1) + 1)
        )
    ]
    peak = max((column["succeeded"] + column["failed"] for column in window), default=0) or 1
    return [
        {
            **column,
            "key": column["minute"].astimezone(UTC).strftime("%Y-%m-%dT%H:%MZ"),
            "label": timezone.localtime(column["minute"]).strftime("%H:%M")
            if column["minute"].minute % AXIS_LABEL_EVERY_MINUTES == 0
            else "",
            "succeeded_percent": round(100 * column["succeeded"] / peak, 2),
            "failed_percent": round(100 * column["failed"] / peak, 2),
        }
        for column in window
    ]
