"""Durations as people read them: 850 ms, 4.2 s, 3 min 5 s, 2 h 10 min; and "3 min ago"; and as
seconds for machines. The console's pages and every app's admin show times this one way.

``moment_html``, ``countdown_html`` and ``copyable_html`` draw the console's live times and
copyable texts (``{% load console %}``); pipeline_project/core/static/console/console.js keeps
their text fresh with the same wording as here."""

from datetime import datetime, timedelta

from django.utils import timezone
from django.utils.html import format_html

UNITS = (("d", 86400), ("h", 3600), ("min", 60))


def duration(value: timedelta | None) -> str:
    if value is None:
        return "–"
    seconds = max(value.total_seconds(), 0.0)
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    return _to_the_second(int(seconds))


def _largest_unit(seconds: int) -> str:
    for unit, size in UNITS:
        if seconds >= size:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


def ago(moment: datetime | None) -> str:
    """How long ago, in its largest unit: "12 s ago", "3 min ago", "2 h ago", "5 d ago"."""
    if moment is None:
        return "–"
    seconds = int((timezone.now() - moment).total_seconds())
    if seconds < 0:
        return "just now"
    return f"{_largest_unit(seconds)} ago"


def seconds(value: timedelta | None) -> str:
    """A duration in seconds for machines (data attributes, tests): "12.345", or "" for none."""
    return "" if value is None else f"{value.total_seconds():.3f}"


def absolute(moment: datetime) -> str:
    """To the second, in the current time zone, the zone stated: "2026-12-02 09:15:03 UTC"."""
    local = timezone.localtime(moment)
    return f"{local:%Y-%m-%d %H:%M:%S} {local.tzname()}"


def _to_the_second(seconds: int) -> str:
    """A span in whole seconds, to the second below an hour: "12 s", "4 min 10 s", "2 h 5 min", "3 d 4 h"."""
    minutes, rest = divmod(seconds, 60)
    if not minutes:
        return f"{rest} s"
    hours, minutes = divmod(minutes, 60)
    if not hours:
        return f"{minutes} min {rest} s"
    if hours < 48:
        return f"{hours} h {minutes} min"
    return f"{hours // 24} d {hours % 24} h"


def _time_html(kind: str, moment: datetime, text: str):
    return format_html(
        '<time class="{}" datetime="{}" title="{}">{}</time>', kind, moment.isoformat(), absolute(moment), text
    )


def moment_html(moment: datetime | None):
    """A moment as "3 min ago" (or "in 3 min"), its absolute time in its title; kept fresh by the page."""
    if moment is None:
        return "–"
    seconds = int((timezone.now() - moment).total_seconds())
    text = f"{_largest_unit(seconds)} ago" if seconds >= 0 else f"in {_largest_unit(-seconds)}"
    return _time_html("moment", moment, text)


def countdown_html(moment: datetime | None):
    """The wait until a moment, to the second ("in 4 min 10 s"; "12 s ago" once past), ticking on the page."""
    if moment is None:
        return "–"
    seconds = int((moment - timezone.now()).total_seconds())
    text = f"in {_to_the_second(seconds)}" if seconds >= 0 else f"{_to_the_second(-seconds)} ago"
    return _time_html("countdown", moment, text)


def copyable_html(text, shown=None):
    """The text (or ``shown``, a shorter form of it) with all of it on hover and a button that copies it."""
    if text is None or text == "":
        return "–"
    full = str(text)
    return format_html(
        '<span class="copyable" title="{}"><span class="copyable-text">{}</span>'
        '<button type="button" class="copy-button" data-copy="{}" title="Copy {}">'
        '<span class="visually-hidden">Copy</span></button></span>',
        full,
        full if shown is None else shown,
        full,
        full,
    )
