"""The throughput charts of the dashboard and the queues page: a window (the last hour per minute,
day per 15 minutes, week per hour), its buckets with the jobs that finished in each status, a
y-axis of round values in jobs per bucket, and time labels on the x-axis."""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cached_property
from math import ceil

from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import mark_safe

from jobs.queue import throughput
from jobs.queue.states import FINISHED


@dataclass(frozen=True)
class Window:
    name: str  # as ?window= says it
    title: str  # "the last hour"
    per: str  # what a column holds: "per minute"
    step: timedelta
    buckets: int
    unit: str  # of the y-axis: jobs per step
    label_minutes: int  # a time label on the x-axis every this many minutes (local time)
    label_format: str


WINDOWS = {
    window.name: window
    for window in (
        Window("hour", "the last hour", "per minute", timedelta(minutes=1), 60, "jobs/min", 15, "%H:%M"),
        Window("day", "the last day", "per 15 minutes", timedelta(minutes=15), 96, "jobs/15 min", 180, "%H:%M"),
        Window("week", "the last week", "per hour", timedelta(hours=1), 168, "jobs/h", 1440, "%a %d"),
    )
}
DEFAULT_WINDOW = "hour"


def window_of(name: str | None) -> Window:
    """The window ``?window=`` names; the last hour for none or an unknown one."""
    return WINDOWS.get(name or "", WINDOWS[DEFAULT_WINDOW])


@dataclass(frozen=True)
class Buckets:
    """The window's buckets, now: the last one holds this moment; they are counted from the local
    midnight, so they start at round local times."""

    window: Window
    starts: list[datetime]

    @classmethod
    def now(cls, window: Window) -> "Buckets":
        now = timezone.now()
        origin = timezone.localtime(now).replace(hour=0, minute=0, second=0, microsecond=0).astimezone(UTC)
        last = origin + (now - origin) // window.step * window.step
        return cls(window, [last - window.step * back for back in range(window.buckets - 1, -1, -1)])

    @cached_property
    def frames(self) -> list[dict]:
        """Each bucket's start, its key, x-axis label and local time: the same in every queue's
        chart, so made once (a week's 168 buckets in 21 charts took 7,000 strftime calls)."""
        frames = []
        for start in self.starts:
            local = timezone.localtime(start)
            on_label = (local.hour * 60 + local.minute) % self.window.label_minutes == 0
            frames.append(
                {
                    "start": start,
                    "key": start.astimezone(UTC).strftime("%Y-%m-%dT%H:%MZ"),
                    "label": local.strftime(self.window.label_format) if on_label else "",
                    "time": local.strftime("%a %Y-%m-%d %H:%M"),
                }
            )
        return frames

    @cached_property
    def x_axis_html(self) -> str:
        return mark_safe("".join(f"<span>{escape(frame['label'])}</span>" for frame in self.frames))

    def finished(self) -> dict[str, dict[datetime, dict[str, int]]]:
        """``{queue: {bucket start: {status: jobs}}}``: the kept counts of the window."""
        per_queue: dict[str, dict[datetime, dict[str, int]]] = {}
        origin = self.starts[-1]
        for queue, status, bucket, jobs in throughput.finished(
            since=self.starts[0], step=self.window.step, origin=origin
        ):
            per_queue.setdefault(queue, {}).setdefault(bucket, {})[status] = jobs
        return per_queue


def round_scale(peak: int, *, intervals: int) -> list[int]:
    """The y-axis' ticks from 0: at most ``intervals`` steps of 1, 2 or 5 × 10ⁿ, the top one at or above ``peak``."""
    step = 1
    for magnitude in (10**power for power in range(19)):
        step = next((multiple * magnitude for multiple in (1, 2, 5) if peak <= intervals * multiple * magnitude), 0)
        if step:
            break
    return [step * tick for tick in range(max(1, ceil(peak / step)) + 1)]


def chart(buckets: Buckets, finished: dict[datetime, dict[str, int]], *, intervals: int = 4) -> dict:
    """A stacked column per bucket (succeeded at the bottom, then failed, canceled, lost), the
    y-axis' ticks with their height in percent, each column's x-axis label, and the totals."""
    window = buckets.window
    frames = buckets.frames
    totals_per_bucket = [sum(finished.get(frame["start"], {}).values()) for frame in frames]
    peak = max(totals_per_bucket, default=0)
    ticks = round_scale(peak, intervals=intervals)
    top = ticks[-1]
    columns = []
    for frame, total in zip(frames, totals_per_bucket, strict=True):
        counts = finished.get(frame["start"], {})
        segments = [
            {"status": status, "count": counts[status], "percent": round(100 * counts[status] / top, 2)}
            for status in FINISHED
            if counts.get(status)
        ]
        columns.append(
            {
                **frame,
                "counts": counts,
                "total": total,
                "segments": segments,
                "every": [(status, counts.get(status, 0)) for status in FINISHED],
                "text": ", ".join(f"{s['count']} {s['status']}" for s in segments) or "none finished",
            }
        )
    totals = {status: sum(column["counts"].get(status, 0) for column in columns) for status in FINISHED}
    return {
        "columns_html": _columns_html(columns),
        "x_axis_html": buckets.x_axis_html,
        "window": window,
        "unit": window.unit,
        "ticks": [{"value": tick, "percent": round(100 * tick / top, 2)} for tick in ticks],
        "columns": columns,
        "busy": [column for column in columns if column["total"]],
        "totals": totals,
        "statuses": FINISHED,
        "peak": peak,
        "summary": ", ".join(f"{jobs} {status}" for status, jobs in totals.items()) + f" in {window.title}",
    }


def _columns_html(columns: list[dict]) -> str:
    """The columns as HTML, built here: a week of 20 queues is 3,500 of them, and the template
    language took 1 s to draw their 13,000 bars (here: a few ms)."""
    html = []
    for column in columns:
        data = "".join(f' data-{status}="{count}"' for status, count in column["every"])
        bars = "".join(
            f'<span class="s-{s["status"]}" style="height: {s["percent"]:.2f}%"></span>' for s in column["segments"]
        )
        title = escape(f"{column['time']}: {column['text']}")
        html.append(f'<div class="bucket" data-bucket="{column["key"]}"{data} title="{title}">{bars}</div>')
    return mark_safe("".join(html))  # our statuses and numbers, the text escaped


def summed(per_queue: dict[str, dict[datetime, dict[str, int]]]) -> dict[datetime, dict[str, int]]:
    """Every queue's buckets added up: the chart of all queues."""
    total: dict[datetime, dict[str, int]] = {}
    for finished in per_queue.values():
        for start, counts in finished.items():
            bucket = total.setdefault(start, {})
            for status, jobs in counts.items():
                bucket[status] = bucket.get(status, 0) + jobs
    return total
