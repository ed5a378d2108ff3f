"""Processes in the admin: browse, filter, read a process's page (``console.process_page``:
its tasks and events a page at a time), repair it from its page or the list.

Every page is read in one snapshot (``read_in_snapshot``): a process changing while its page
is built shows as it was before or after, never half of each.
"""

from django.contrib import admin, messages
from django.contrib.admin import ShowFacets
from django.core.exceptions import PermissionDenied
from django.template.response import TemplateResponse
from django.urls import URLPattern, path

from jobs.processes import selectors
from jobs.processes.console.admin_process_page import REPAIRS, ProcessPageAdminMixin, Repair
from jobs.processes.console.process_page import precise
from jobs.processes.models import PROCESS_STATUSES, Process
from pipeline_project.audit.actions import may
from pipeline_project.db.counts import sum_matching
from pipeline_project.db.snapshot import read_in_snapshot
from pipeline_project.web.admin import KeysetAdminMixin, ReadOnlyAdminMixin
from pipeline_project.web.times import moment_html

TIMERS_SHOWN = 200  # the namespaces page's timers due within the hour, soonest first


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
class ProcessAdmin(ProcessPageAdminMixin, KeysetAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    """Processes change only through their processors and the repairs (the page's buttons, the list's actions)."""

    list_display = ["process_id", "namespace", "status", "previous_status", "status_changed", "detail", "created"]
    list_filter = [StatusFilter, NamespaceFilter]
    search_fields = ["=process_id"]
    search_help_text = "Exact process id"
    list_per_page = 100
    show_facets = ShowFacets.NEVER  # a facet's count would read every process

    def keyset_count(self, request, changelist) -> int | None:
        """The processes the namespace and status filters match, from the counts."""
        wanted = [request.GET.get("namespace"), request.GET.get("status__exact")]
        return sum_matching(selectors.process_counts(), wanted)

    actions = ["repair_processes", "simple_repair_processes"]
    change_list_template = "admin/processes/process/change_list.html"

    @admin.display(description="status changed")
    def status_changed(self, obj):
        return moment_html(obj.status_changed_at)

    @admin.display(description="created")
    def created(self, obj):
        return moment_html(obj.created_at)

    def has_repair_permission(self, request):
        return may(request.user, "process.repair")

    @admin.action(permissions=["repair"], description="Repair through the processor (task type repair)")
    def repair_processes(self, request, queryset):
        self._each(request, queryset, REPAIRS["repair"])

    @admin.action(permissions=["repair"], description="Simple repair (back to running; a corrupting timer runs again)")
    def simple_repair_processes(self, request, queryset):
        self._each(request, queryset, REPAIRS["simple_repair"])

    def _each(self, request, queryset, repair: Repair) -> None:
        selected = list(queryset)  # one read: the counts below add up
        in_error = [process for process in selected if process.status == "error"]
        changed, refused = self.repaired(request, in_error, repair)
        left = len(selected) - len(in_error)
        self.message_user(request, f"{len(changed)} process(es) {repair.done}; {left} not in error left alone.")
        for message in refused:
            self.message_user(request, message, messages.WARNING)

    def get_urls(self):
        urls = [
            path(
                "namespaces/",
                self.admin_site.admin_view(self.namespaces_view),
                name="processes_process_namespaces",
            ),
            *self.process_page_urls(),
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
            "timers": [
                {**timer, "at": precise(timer["scheduled_time"])}
                for timer in selectors.timers_due(within_sec=selectors.TIMERS_WITHIN_SEC, limit=TIMERS_SHOWN)
            ],
        }
        return TemplateResponse(request, "admin/processes/namespaces.html", context)
