import json
import uuid
from contextlib import suppress

from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.db.models import Q
from django.template.response import TemplateResponse
from django.utils.html import format_html

from jobs.queue import selectors, services
from jobs.queue.console import admin_queues  # noqa: F401 (the queues' and workers' pages)
from jobs.queue.console.admin_dashboard import DashboardAdminMixin
from jobs.queue.console.admin_job_list import (
    BODY_TEMPLATE,
    FRAGMENT_VAR,
    JobChangeList,
    StateFilter,
    cell,
    status_cell,
    times_cell,
)
from jobs.queue.console.admin_job_page import JobPageAdminMixin
from jobs.queue.models import Job, PeriodicTask
from pipeline_project.audit.actions import may
from pipeline_project.audit.services import audited_call
from pipeline_project.db.snapshot import rendered_in_snapshot
from pipeline_project.web.admin import KeysetAdminMixin, ReadOnlyAdminMixin
from pipeline_project.web.arguments import search_refusal
from pipeline_project.web.times import ago


class CountedValueFilter(admin.SimpleListFilter):
    """The queues (or tasks) there are jobs of, from the counts the triggers keep (Django's own
    filter would read every job for them)."""

    column = ""

    def lookups(self, request, model_admin):
        return [(value, value) for value in sorted({row[self.column] for row in selectors.job_counts()})]

    def queryset(self, request, queryset):
        value = self.value()
        return queryset if value is None else queryset.filter(**{self.parameter_name: value})


class QueueFilter(CountedValueFilter):
    title = parameter_name = "queue"
    column = 0


class TaskFilter(CountedValueFilter):
    title = parameter_name = "task"
    column = 1


@admin.register(Job)
class JobAdmin(JobPageAdminMixin, DashboardAdminMixin, KeysetAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    """Jobs are created by producers and change only through services (the actions below).

    The actions act on the selected jobs, or on every job the current filters match when
    "select all" is used, in one statement each, after a page that says how many will change.
    """

    list_display = ["short_id", "task_name", "queue_name", "status_badge", "created", "times", "error_line"]
    list_display_links = ["short_id"]
    list_filter = [StateFilter, QueueFilter, TaskFilter]
    search_fields = ["job_id", "idempotency_key", "lock_key"]
    search_help_text = (
        'Exact job id, idempotency key or lock key; args:{"source_id": 7} (JSON the args contain); '
        f"error:timeout (the errors of jobs created in the last {settings.DL_ERROR_SEARCH_HOURS:g} hours)"
    )
    keyset = "job_id"  # UUIDv7: newest first, read straight off the primary key, older pages by it
    list_per_page = 100
    actions = ["retry_jobs", "cancel_jobs", "delete_jobs"]
    change_list_template = "admin/jobs/job/change_list.html"

    def get_changelist(self, request, **kwargs):
        return JobChangeList

    def keyset_count(self, request, changelist) -> int | None:
        """The jobs the queue, task and state filters match, from the counts (``job_states``)."""
        return changelist.counted()

    def changelist_view(self, request, extra_context=None):
        """The list, or for its live refresh (``?fragment=1``) its body: tabs, actions and rows."""
        view = super().changelist_view
        if request.method != "GET":  # an action: it writes, and reads what it needs itself
            return view(request, extra_context)
        fragment = FRAGMENT_VAR in request.GET
        if fragment:  # no filter: the admin would refuse it
            request.GET = request.GET.copy()
            del request.GET[FRAGMENT_VAR]

        def answer():
            response = view(request, extra_context)
            if fragment and isinstance(response, TemplateResponse):
                response.template_name = BODY_TEMPLATE
            return response

        return rendered_in_snapshot(answer)

    @admin.display(description="task", ordering="task")
    def task_name(self, obj):
        """A Django task is named by its module path: its name first, the module after it (cut first)."""
        module, _dot, name = obj.task.rpartition(".")
        return format_html(
            '<span class="cell task" title="{}"><span class="name">{}</span> <span class="module">{}</span></span>',
            obj.task,
            name,
            module,
        )

    @admin.display(description="queue", ordering="queue")
    def queue_name(self, obj):
        return cell(obj.queue)

    @admin.display(description="job", ordering="job_id")
    def short_id(self, obj):
        # The end of the id: a UUIDv7 starts with its timestamp, the same for jobs made together.
        return format_html('<span title="{}">…{}</span>', obj.job_id, str(obj.job_id)[-8:])

    @admin.display(description="state · attempt", ordering="status")
    def status_badge(self, obj):
        return status_cell(obj)

    @admin.display(description="created", ordering="created_at")
    def created(self, obj):
        return format_html(
            '<time datetime="{}" title="{}">{}</time>',
            obj.created_at.isoformat(),
            obj.created_at.strftime("%Y-%m-%d %H:%M:%S %Z"),
            ago(obj.created_at),
        )

    @admin.display(description="waited · ran / due")
    def times(self, obj):
        return times_cell(obj)

    @admin.display(description="error")
    def error_line(self, obj):
        first = (obj.error or "").split("\n", 1)[0]
        return cell(first) if first else ""

    def has_retry_permission(self, request):
        return may(request.user, "job.retry")

    def has_cancel_permission(self, request):
        return may(request.user, "job.cancel")

    def has_remove_permission(self, request):
        """Deleting through the delete action (the admin's own delete stays off)."""
        return may(request.user, "job.delete")

    def get_search_results(self, request, queryset, search_term):
        # Exact matches only: no LIKE scans over a table of millions of rows (error: is the exception).
        term = search_term.strip()
        if not term:
            return queryset, False
        if term.startswith("args:"):
            try:
                wanted = json.loads(term.removeprefix("args:"))
            except ValueError:
                wanted = None
            if not isinstance(wanted, dict):
                self.message_user(request, 'args: takes a JSON object, e.g. args:{"source_id": 7}', messages.ERROR)
                return queryset.none(), False
            if refusal := search_refusal(wanted, request=request):  # else a match would confirm a guessed secret
                self.message_user(request, refusal, messages.ERROR)
                return queryset.none(), False
            return queryset.filter(args__contains=wanted), False
        if term.startswith("error:"):
            return selectors.jobs_with_error(queryset, text=term.removeprefix("error:").strip()), False
        matches = Q(idempotency_key=term) | Q(lock_key=term)
        with suppress(ValueError):  # not a job id; the keys may still match
            matches |= Q(job_id=uuid.UUID(term))
        return queryset.filter(matches), False

    @admin.action(description="Retry selected jobs (failed, canceled or lost only)", permissions=["retry"])
    def retry_jobs(self, request, queryset):
        return self._confirmed(
            request,
            queryset,
            lambda selection, dry_run: services.jobs_retry(
                selection=selection, by=request.user.get_username(), dry_run=dry_run
            ),
            verb="retry",
            changed="put back in their queue for a new run",
            skipped="not failed, canceled or lost",
        )

    @admin.action(description="Cancel selected jobs", permissions=["cancel"])
    def cancel_jobs(self, request, queryset):
        return self._confirmed(
            request,
            queryset,
            lambda selection, dry_run: services.jobs_cancel(
                selection=selection, by=request.user.get_username(), dry_run=dry_run
            ),
            verb="cancel",
            changed="queued and canceled at once",
            skipped="already finished",
        )

    @admin.action(
        description="Delete selected jobs (and their events; running ones are left alone)", permissions=["remove"]
    )
    def delete_jobs(self, request, queryset):
        return self._confirmed(
            request,
            queryset,
            lambda selection, dry_run: services.jobs_delete(selection=selection, dry_run=dry_run),
            verb="delete",
            changed="deleted with their events",
            skipped="running",
        )

    def _confirmed(self, request, queryset, act, *, verb: str, changed: str, skipped: str):
        """Ask first, saying how many jobs the action changes; act when confirmed."""
        selection = services.Selection.of_queryset(queryset)
        if request.POST.get("confirmed") != "yes":
            counts = act(selection, True)
            return TemplateResponse(
                request,
                "admin/jobs/job/action_confirmation.html",
                {
                    **self.admin_site.each_context(request),
                    "opts": self.model._meta,
                    "title": f"{verb.capitalize()} {counts.matched} job(s)?",
                    "verb": verb,
                    "counts": counts,
                    "changed": changed,
                    "skipped": skipped,
                    "carried": [
                        (name, value)
                        for name, values in request.POST.lists()
                        if name not in ("csrfmiddlewaretoken", "confirmed")
                        for value in values
                    ],
                    "action_checkbox_name": ACTION_CHECKBOX_NAME,
                },
            )
        across = request.POST.get("select_across") == "1"  # every job the list's filters match
        counts = audited_call(
            lambda: act(selection, False),
            request=request,
            action=f"job.{verb}",
            objects=[] if across else request.POST.getlist(ACTION_CHECKBOX_NAME),
            filter=dict(request.GET.items()) if across else None,
            count=lambda counts: counts.changed,
            detail=lambda counts: {"matched": counts.matched, "requested": counts.requested},
        )
        requested = f"; cancellation requested for {counts.requested} running" if counts.requested else ""
        self.message_user(
            request,
            f"{counts.matched} job(s) matched: {counts.changed} {changed}{requested}; {counts.skipped} {skipped}, left alone.",
        )
        return None

    def get_urls(self):
        return [
            *self.job_page_urls(),
            *self.dashboard_urls(),
            *super().get_urls(),
        ]


@admin.register(PeriodicTask)
class PeriodicTaskAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """The shared schedule of the queue's housekeeping; runworker processes keep it."""

    list_display = ["name", "last_started_at", "last_finished_at", "last_runner", "last_result"]
