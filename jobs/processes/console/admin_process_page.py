"""A process's page in the admin (``process_page``) instead of Django's change form, and its
Repair and Simple repair buttons: each a POST calling the service the list's actions call,
recorded in the audit trail."""

from collections.abc import Callable
from dataclasses import dataclass

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponseNotAllowed
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse

from jobs.processes import services
from jobs.processes.console.process_page import process_page
from jobs.processes.models import Process, process_audit_id
from pipeline_project.api.errors import ApplicationError
from pipeline_project.audit.selectors import audit_entries_for
from pipeline_project.audit.services import audited_call


@dataclass(frozen=True)
class Repair:
    """One way to repair a process in error: its audited action, what it does, what is said after."""

    action: str
    make: Callable[[Process], object]
    done: str  # "3 process(es) <done>"


REPAIRS = {
    "repair": Repair(
        "process.repair",
        lambda process: services.process_task_prepare(
            "repair", namespace=process.namespace, process_id=process.process_id
        ),
        "repair scheduled (the processor runs it next)",
    ),
    "simple_repair": Repair(
        "process.simple_repair",
        lambda process: services.process_simple_repair(namespace=process.namespace, process_id=process.process_id),
        "set running",
    ),
}


class ProcessPageAdminMixin:
    """For the processes' ModelAdmin: the process's page, and its repair buttons."""

    def process_page_urls(self) -> list:
        view = self.admin_site.admin_view(self.process_action_view)
        return [path("<int:object_id>/act/<str:action>/", view, name="processes_process_act")]

    def change_view(self, request, object_id, form_url="", extra_context=None):
        """The process's page (not a form: a process changes through its processor and the repairs)."""
        if request.method != "GET":
            raise PermissionDenied
        process = self._process_or_404(request, object_id)
        if not self.has_view_permission(request, process):
            raise PermissionDenied
        audit_id = process_audit_id(namespace=process.namespace, process_id=process.process_id)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": f"Process {process}",
            **process_page(process, request=request, can_repair=self.has_repair_permission(request)),
            "audit_entries": audit_entries_for(object_type="process", object_id=audit_id),
        }
        fragment = request.GET.get("fragment")
        template = "page_body.html" if fragment else "page.html"
        return TemplateResponse(request, f"admin/processes/process/{template}", context)

    def _process_or_404(self, request, object_id) -> Process:
        process = self.get_object(request, object_id)
        if process is None:  # removed (or never was): the page and its live refresh say so
            raise Http404(f"No process {object_id}.")
        return process

    def process_action_view(self, request, object_id, action):
        """Repair or Simple repair from the process's page: a POST (the page asks first)."""
        if action not in REPAIRS or not self.has_repair_permission(request):
            raise PermissionDenied
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        process = self._process_or_404(request, object_id)
        if process.status != "error":
            self.message_user(request, f"Process {process} is {process.status}: nothing to repair.", messages.WARNING)
        else:
            changed, refused = self.repaired(request, [process], REPAIRS[action])
            if changed:
                self.message_user(request, f"Process {process}: {REPAIRS[action].done}.", messages.SUCCESS)
            for message in refused:
                self.message_user(request, message, messages.WARNING)
        return redirect(reverse("admin:processes_process_change", args=[process.pk]))

    def repaired(self, request, processes: list[Process], repair: Repair) -> tuple[list[str], list[str]]:
        """Repair each of ``processes`` (in error), recorded as one audit entry naming those
        repaired: their audit ids, and why the service refused the others (changed meanwhile)."""
        refused = []

        def each() -> list[str]:
            changed = []
            for process in processes:
                try:
                    repair.make(process)
                    changed.append(process_audit_id(namespace=process.namespace, process_id=process.process_id))
                except ApplicationError as error:
                    refused.append(f"{process}: {error.message}")
            return changed

        return audited_call(each, request=request, action=repair.action, count=len, objects_of=list), refused
