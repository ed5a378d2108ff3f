"""The colours of statuses, in one place, for the light and the dark theme: badges (text on
the colour) and chart bars (the colour alone) of the admin and the /pipeline pages.

Each status has a background and a text colour per theme, chosen so the text reaches WCAG
AA's 4.5:1 on its background (tests/jobs/queue/console/test_status_palette.py checks every pair). Pages
use them through classes (``s-<status>``, with ``status-badge`` for a badge) or the CSS
variables ``--status-<status>-bg`` and ``--status-<status>-fg``.
"""

from django import template
from django.utils.html import format_html
from django.utils.safestring import mark_safe

register = template.Library()

LIGHT_TEXT, DARK_TEXT = "#ffffff", "#111111"

# status → {theme: (background, text)}. Light theme: dark colours under white text; dark
# theme: light colours under near-black text (and bars that stand out on a dark page).
PALETTE = {
    "queued": {"light": ("#52606d", LIGHT_TEXT), "dark": ("#aab4c0", DARK_TEXT)},
    # Queued, due later: scheduled (not tried yet), retryable (after a failed attempt).
    "scheduled": {"light": ("#0f766e", LIGHT_TEXT), "dark": ("#5eead4", DARK_TEXT)},
    "retryable": {"light": ("#be185d", LIGHT_TEXT), "dark": ("#f9a8d4", DARK_TEXT)},
    "running": {"light": ("#1d4ed8", LIGHT_TEXT), "dark": ("#7cb2ff", DARK_TEXT)},
    "succeeded": {"light": ("#15803d", LIGHT_TEXT), "dark": ("#4cc38a", DARK_TEXT)},
    "failed": {"light": ("#b91c1c", LIGHT_TEXT), "dark": ("#ff8a8a", DARK_TEXT)},
    "canceled": {"light": ("#8a4b08", LIGHT_TEXT), "dark": ("#e6a96a", DARK_TEXT)},
    "lost": {"light": ("#6d28d9", LIGHT_TEXT), "dark": ("#c4a5ff", DARK_TEXT)},
    # Something asks for a person's attention: a cancel requested, a paused queue, a review.
    "attention": {"light": ("#f2b92c", "#1f1f1f"), "dark": ("#f5c451", DARK_TEXT)},
    # Chart bars only: the rest of a whole (no text on it).
    "other": {"light": ("#c7ced6", "#1f1f1f"), "dark": ("#4a5561", "#ffffff")},
}
# Other names for the same colours: the tracking stages', and badges that mean "attention".
ALIASES = {
    "new": "queued",
    "available": "queued",  # queued, due now
    "started": "running",
    "done": "succeeded",
    "cancel-requested": "attention",
    "paused": "attention",
    "waiting": "other",  # queued, but waiting for other jobs
}


def _variables(theme: str) -> str:
    return "".join(
        f"--status-{status}-bg: {colours[theme][0]}; --status-{status}-fg: {colours[theme][1]}; "
        for status, colours in PALETTE.items()
    )


def _classes() -> str:
    names = {**{status: status for status in PALETTE}, **ALIASES}
    return "".join(
        f".s-{name} {{ background-color: var(--status-{status}-bg); }} "
        f".status-badge.s-{name} {{ color: var(--status-{status}-fg); }} "
        for name, status in names.items()
    )


# The same three rules as Django's own theme variables: the light theme by default or when
# chosen, the dark one when the system prefers it (unless light was chosen) or when chosen.
_STYLE = (
    f'html[data-theme="light"], :root {{ {_variables("light")}}} '
    f"@media (prefers-color-scheme: dark) {{ :root {{ {_variables('dark')}}} }} "
    f'html[data-theme="dark"] {{ {_variables("dark")}}} '
    f"{_classes()}"
    ".status-badge { display: inline-block; padding: .05em .5em; border-radius: 3px; font-weight: 600; }"
)


@register.simple_tag
def status_palette() -> str:
    return format_html("<style>{}</style>", mark_safe(_STYLE))
