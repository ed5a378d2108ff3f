"""The console frame's filters and tag (``{% load console %}``), for every admin and /pipeline page:
``{{ dt|moment }}`` ("3 min ago", kept fresh), ``{{ dt|countdown }}`` ("in 4 min 10 s", ticking),
``{{ text|copyable }}`` / ``{{ text|copyable:shown }}`` (all of it on hover, a copy button), and
``{% console_shortcuts %}``: the keys that lead to the console's main pages, for console.js; and
``{{ audit_entries|entries_shown }}``: "3 entries", or "the latest 20 entries" when there may be more;
``{{ number|counted:opts }}``: "1 job", "250 jobs", "0 audit entries" (not "0 audit trail")."""

from django import template
from django.urls import NoReverseMatch, reverse
from django.utils.html import json_script

from pipeline_project.audit.selectors import SHOWN_ON_A_PAGE
from pipeline_project.web.times import copyable_html, countdown_html, moment_html

register = template.Library()
register.filter("moment", moment_html)
register.filter("countdown", countdown_html)
register.filter("copyable", copyable_html)

# keys, what they lead to, the URL's name
PAGES = (
    ("g d", "Jobs dashboard", "admin:jobs_job_dashboard"),
    ("g j", "Job list", "admin:jobs_job_changelist"),
    ("g q", "Queues", "admin:jobs_queue_changelist"),
    ("g w", "Workers", "admin:jobs_worker_changelist"),
    ("g p", "Processes", "admin:processes_process_changelist"),
    ("g r", "Pipeline runs", "ingestion-runs"),
)


def _reachable():
    for keys, label, name in PAGES:
        try:
            yield [keys, label, reverse(name)]
        except NoReverseMatch:  # a page this deployment's URLconf does not serve
            continue


@register.simple_tag
def console_shortcuts():
    return json_script(list(_reachable()), "console-shortcuts-data")


@register.filter
def entries_shown(entries) -> str:
    shown = len(entries)
    if shown >= SHOWN_ON_A_PAGE:  # the selector's limit: there may be more
        return f"the latest {shown} entries"
    return "1 entry" if shown == 1 else f"{shown} entries"


def _plural(words: str) -> str:
    if words.endswith("y") and words[-2:-1] not in "aeiou":
        return f"{words[:-1]}ies"
    return f"{words}es" if words.endswith(("s", "x", "ch", "sh")) else f"{words}s"


@register.filter
def counted(number, opts) -> str:
    """A number of a model's objects. A plural that names the whole ("audit trail", whose items
    are audit entries) is no count's noun: the items' name is made plural instead."""
    if number == 1:
        return f"1 {opts.verbose_name}"
    plural, item = str(opts.verbose_name_plural), str(opts.verbose_name)
    counts_items = plural.split()[-1].startswith(item.split()[-1].removesuffix("y"))
    return f"{number} {plural if counts_items else _plural(item)}"
