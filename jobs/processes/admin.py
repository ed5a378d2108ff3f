"""Processes in the admin: browse, filter, read a process's history and tasks, repair it.

Every page is read in one snapshot (``read_in_snapshot``): a process changing while its page
is built shows as it was before or after, never half of each.
"""

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.forms.models import BaseInlineFormSet
from django.template.response import TemplateResponse
from django.urls import URLPattern, path

from jobs.processes import selectors, services
from jobs.processes.models import PROCESS_STATUSES, Event, Process, Task, process_audit_id
from pipeline_project.api.errors import ApplicationError
from pipeline_project.audit.actions import may
from pipeline_project.audit.selectors import audit_entries_for
from pipeline_project.audit.services import audited_call
from pipeline_project.db.counts import sum_matching
from pipeline_project.db.snapshot import read_in_snapshot
from pipeline_project.web.admin import KeysetAdminMixin, ReadOnlyAdminMixin, ReadOnlyTabularInline
from pipeline_project.web.arguments import arguments_masked_text, may_view_arguments


class LatestInlineFormSet(BaseInlineFormSet):
    """A process's latest rows only (its inline's ``latest``): a process may have 10,000 events."""

    def get_queryset(self):
        if not hasattr(self, "_latest"):  # once: every form of the set reads it
            self._latest = super().get_queryset()[: self.latest]
        return self._latest


class TaskInline(ReadOnlyTabularInline):
    model = Task
    formset = LatestInlineFormSet
    latest = 100
    verbose_name_plural = f"tasks (the latest {latest})"
    fields = [
        "task_id",
        "task_type",
        "status",
        "scheduled_time",
        "running_time",
        "finished_time",
        "args",
        "response",
        "attempts_count",
    ]
    ordering = ["-task_id"]

    def get_fields(self, request, obj=None):
        # A user who may not view arguments sees the args with their secrets masked instead.
        shown = "args" if may_view_arguments(request) else "masked_args"
        return [shown if name == "args" else name for name in self.fields]

    def get_readonly_fields(self, request, obj=None):
        return self.get_fields(request, obj)

    @admin.display(description="args")
    def masked_args(self, obj):
        return arguments_masked_text(obj.args)

    def get_formset(self, request, obj=None, **kwargs):
        formset = super().get_formset(request, obj, **kwargs)
        formset.latest = self.latest
        return formset


class EventInline(TaskInline):
    model = Event
    latest = 200
    verbose_name_plural = f"events (the latest {latest}; the API's history range reads any)"
    fields = ["event_id", "task", "timestamp", "payload", "metadata"]
    ordering = ["-event_id"]

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("task")  # each row shows its task


class StatusFilter(admin.SimpleListFilter):
    """A process's statuses are few and known: no read of the processes for them."""

    title = "status"
    parameter_name = "status__exact"

    def lookups(self, request, model_admin):
        return [(status, status) for status in PROCESS_STATUSES]

    def queryset(self, request, queryset):
        return queryset if self.value() is None else queryset.filter(status=self.value())


class NamespaceFilter(admin.SimpleListFilter):
    """The namespaces there are processes of, from the counts the triggers keep."""

    title = parameter_name = "namespace"

    def lookups(self, request, model_admin):
        return [(name, name) for name in sorted({row[0] for row in selectors.process_counts()})]

    def queryset(self, request, queryset):
        return queryset if self.value() is None else queryset.filter(namespace=self.value())


@admin.register(Process)
class ProcessAdmin(KeysetAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    """Processes change only through their processors and the repair actions below."""

    list_display = ["process_id", "namespace", "status", "previous_status", "status_changed_at", "detail", "created_at"]
    list_filter = [StatusFilter, NamespaceFilter]
    search_fields = ["=process_id"]
    search_help_text = "Exact process id"
    list_per_page = 100

    def keyset_count(self, request, changelist) -> int | None:
        """The processes the namespace and status filters match, from the counts."""
        wanted = [request.GET.get("namespace"), request.GET.get("status__exact")]
        return sum_matching(selectors.process_counts(), wanted)

    inlines = [TaskInline, EventInline]
    actions = ["repair_processes", "simple_repair_processes"]
    change_list_template = "admin/processes/process/change_list.html"
    change_form_template = "admin/processes/process/change_form.html"

    def has_repair_permission(self, request):
        return may(request.user, "process.repair")

    def change_view(self, request, object_id, form_url="", extra_context=None):
        process = self.get_object(request, object_id)
        entries = []
        if process is not None:
            audit_id = process_audit_id(namespace=process.namespace, process_id=process.process_id)
            entries = audit_entries_for(object_type="process", object_id=audit_id)
        return super().change_view(request, object_id, form_url, {**(extra_context or {}), "audit_entries": entries})

    @admin.action(permissions=["repair"], description="Repair through the processor (task type repair)")
    def repair_processes(self, request, queryset):
        self._each(
            request,
            queryset,
            "process.repair",
            lambda p: services.process_task_prepare("repair", namespace=p.namespace, process_id=p.process_id),
        )

    @admin.action(permissions=["repair"], description="Simple repair (back to running; a corrupting timer runs again)")
    def simple_repair_processes(self, request, queryset):
        self._each(
            request,
            queryset,
            "process.simple_repair",
            lambda p: services.process_simple_repair(namespace=p.namespace, process_id=p.process_id),
        )

    def _each(self, request, queryset, action: str, act) -> None:
        refused = []
        selected = list(queryset)  # one read: the counts below add up
        skipped = sum(process.status != "error" for process in selected)

        def each() -> list:
            changed = []
            for process in [process for process in selected if process.status == "error"]:
                try:
                    act(process)
                    changed.append(process_audit_id(namespace=process.namespace, process_id=process.process_id))
                except ApplicationError as error:
                    refused.append(f"{process}: {error.message}")
            return changed

        changed = audited_call(each, request=request, action=action, count=len, objects_of=list)
        done = "repair scheduled" if action == "process.repair" else "set running"
        self.message_user(request, f"{len(changed)} process(es) {done}; {skipped} not in error left alone.")
        for message in refused:
            self.message_user(request, message, messages.WARNING)

    def get_urls(self):
        urls = [
            path(
                "namespaces/",
                self.admin_site.admin_view(self.namespaces_view),
                name="processes_process_namespaces",
            ),
            *super().get_urls(),
        ]
        return [URLPattern(url.pattern, read_in_snapshot(url.callback), url.default_args, url.name) for url in urls]

    def namespaces_view(self, request):
        if not self.has_view_permission(request):
            raise PermissionDenied
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Process namespaces",
            "namespaces": selectors.namespaces_counts(),
            "timers": selectors.timers_due(within_sec=selectors.TIMERS_WITHIN_SEC, limit=200),
        }
        return TemplateResponse(request, "admin/processes/namespaces.html", context)
