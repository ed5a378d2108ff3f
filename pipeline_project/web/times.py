"""Durations as people read them: 850 ms, 4.2 s, 3 min 5 s, 2 h 10 min; and "3 min ago"; and as
seconds for machines. The console's pages and every app's admin show times this one way."""

from datetime import datetime, timedelta

from django.utils import timezone


def duration(value: timedelta | None) -> str:
    if value is None:
        return "–"
    seconds = max(value.total_seconds(), 0.0)
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, seconds = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min"
    return f"{hours // 24} d {hours % 24} h"


def ago(moment: datetime | None) -> str:
    """How long ago, in its largest unit: "12 s ago", "3 min ago", "2 h ago", "5 d ago"."""
    if moment is None:
        return "–"
    seconds = int((timezone.now() - moment).total_seconds())
    if seconds < 0:
        return "just now"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit} ago"
    return f"{seconds} s ago"


def seconds(value: timedelta | None) -> str:
    """A duration in seconds for machines (data attributes, tests): "12.345", or "" for none."""
    return "" if value is None else f"{value.total_seconds():.3f}"
