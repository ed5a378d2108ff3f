"""The queues' and the workers' admin pages, registered here (``jobs.queue.admin`` imports this):
each page instead of its model's list, refreshed live, read in one snapshot. A queue's row is
``dl_queues``' only once an operator changed it, and a worker's list would join through the
journal row by row: the pages show every queue the service has seen, and every worker with the
jobs it runs, from the reads of ``queues_page`` and ``workers_page``."""

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.template.response import TemplateResponse

from jobs.queue.console import charts
from jobs.queue.console.queues_page import Permissions, queues_view
from jobs.queue.console.workers_page import workers_view
from jobs.queue.models import Queue, Worker
from pipeline_project.audit.actions import may
from pipeline_project.db.snapshot import rendered_in_snapshot
from pipeline_project.web.admin import ReadOnlyAdminMixin


class PageInsteadOfListMixin:
    """A page of its own at the model's list URL: ``page_context`` fills ``page_template``, whose
    ``_body`` part answers ``?fragment=1`` (the live refresh)."""

    page_template = ""
    page_title = ""

    def page_context(self, request) -> dict:
        raise NotImplementedError

    def changelist_view(self, request, extra_context=None):
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        return rendered_in_snapshot(lambda: self._page(request))

    def _page(self, request):
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": self.page_title,
            "at_model_list": True,
            **self.page_context(request),
        }
        fragment = bool(request.GET.get("fragment"))
        return TemplateResponse(request, f"{self.page_template}{'_body' if fragment else ''}.html", context)


@admin.register(Worker)
class WorkerAdmin(PageInsteadOfListMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    """Rows belong to runworker processes: they register, heartbeat and deregister themselves.
    A killed worker's row stays, marked dead, until the periodic task forgets it."""

    page_template = "admin/jobs/workers"
    page_title = "Workers"

    def page_context(self, request) -> dict:
        return workers_view()


@admin.register(Queue)
class QueueAdmin(PageInsteadOfListMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    """Every queue the service has seen, paused, resumed and limited from its row."""

    page_template = "admin/jobs/queues"
    page_title = "Queues"

    def page_context(self, request) -> dict:
        permissions = Permissions(
            can_pause=may(request.user, "queue.pause"), can_limit=may(request.user, "queue.limits")
        )
        window = charts.window_of(request.GET.get("window"))
        return queues_view(window=window, permissions=permissions, back_to=f"{request.path}?window={window.name}")
