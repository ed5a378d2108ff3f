"""The jobs dashboard in the admin: its page (under the jobs' admin, its permissions) and the
pause and resume buttons and limits forms of the queues' rows (here and on the queues page, which
each come back to)."""

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from jobs.queue import services
from jobs.queue.console import charts, dashboard
from jobs.queue.console.queues_page import Permissions
from pipeline_project.api.errors import ApplicationError
from pipeline_project.audit.actions import may
from pipeline_project.audit.services import audited_call
from pipeline_project.db.snapshot import rendered_in_snapshot


class DashboardAdminMixin:
    """For the jobs' ModelAdmin: the dashboard's URLs and views."""

    def dashboard_urls(self) -> list:
        site = self.admin_site
        return [
            path("dashboard/", site.admin_view(self.dashboard_view), name="jobs_job_dashboard"),
            path(  # before the pause and resume path, which would take it
                "dashboard/queues/<path:queue>/limits/",
                site.admin_view(require_POST(self.queue_limits_view)),
                name="jobs_job_queue_limits",
            ),
            path(
                "dashboard/queues/<path:queue>/<str:change>/",
                site.admin_view(require_POST(self.queue_change_view)),
                name="jobs_job_queue_change",
            ),
        ]

    def dashboard_view(self, request):
        if not self.has_view_permission(request):
            raise PermissionDenied
        return rendered_in_snapshot(lambda: self._dashboard(request))

    def _dashboard(self, request):
        window = charts.window_of(request.GET.get("window"))
        permissions = Permissions(
            can_pause=may(request.user, "queue.pause"), can_limit=may(request.user, "queue.limits")
        )
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Jobs dashboard",
            **dashboard.context(window=window, permissions=permissions, back_to=f"{request.path}?window={window.name}"),
        }
        template = "admin/jobs/dashboard_body.html" if request.GET.get("fragment") else "admin/jobs/dashboard.html"
        return TemplateResponse(request, template, context)

    def queue_change_view(self, request, queue, change):
        if change not in ("pause", "resume") or not may(request.user, f"queue.{change}"):
            raise PermissionDenied
        act = services.queue_pause if change == "pause" else services.queue_resume
        try:
            changed = audited_call(
                lambda: act(queue=queue, by=request.user.get_username()),
                request=request,
                action=f"queue.{change}",
                objects=[queue],
                count=int,
            )
        except ApplicationError as error:
            self.message_user(request, error.message, messages.ERROR)
        else:
            done = "paused" if change == "pause" else "resumed"
            self.message_user(request, f"Queue {queue} {done}." if changed else f"Queue {queue} was already {done}.")
        return _back(request)

    def queue_limits_view(self, request, queue):
        if not may(request.user, "queue.limits"):
            raise PermissionDenied
        form = QueueLimitsForm(request.POST)
        problems = form.errors
        if form.is_valid():
            try:
                limits = audited_call(
                    lambda: services.queue_limits_set(queue=queue, by=request.user.get_username(), **form.cleaned_data),
                    request=request,
                    action="queue.limits",
                    objects=[queue],
                    detail=lambda limits: form.cleaned_data,
                )
            except ApplicationError as error:
                problems = error.details or {"queue": [error.message]}
            else:
                self.message_user(request, f"Queue {limits.queue}: limits set.")
        if problems:
            listed = "; ".join(f"{name}: {' '.join(errors)}" for name, errors in problems.items())
            self.message_user(request, f"Invalid queue limits: {listed}", messages.ERROR)
        return _back(request)


def _back(request):
    """To the page the button was on (its form's ``next``), or else the dashboard."""
    page = request.POST.get("next", "")
    if url_has_allowed_host_and_scheme(page, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        return redirect(page)
    return redirect(reverse("admin:jobs_job_dashboard"))


class QueueLimitsForm(forms.Form):
    """Types only (the rules are ``services.queue_limits_set``'s); an empty limit is no limit."""

    max_running = forms.IntegerField(required=False)
    rate_limit = forms.IntegerField(required=False)
    rate_period_sec = forms.IntegerField(required=False)
    per_partition = forms.BooleanField(required=False)
