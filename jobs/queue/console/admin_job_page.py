"""A job's page in the admin: the page itself (its journal, data and errors, live), and its
Retry, Cancel and Delete buttons, each calling one service."""

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponseNotAllowed
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse

from jobs.queue import selectors, services
from jobs.queue.console.job_page import job_page
from jobs.queue.models import Job
from pipeline_project.audit.selectors import audit_entries_for
from pipeline_project.audit.services import audited_call
from pipeline_project.db.snapshot import rendered_in_snapshot


class JobPageAdminMixin:
    """For the jobs' ModelAdmin: the job's page instead of a change form, and its buttons."""

    def job_page_urls(self) -> list:
        site = self.admin_site
        return [path("<uuid:object_id>/act/<str:action>/", site.admin_view(self.job_action_view), name="jobs_job_act")]

    def change_view(self, request, object_id, form_url="", extra_context=None):
        """The job's page (not a form: jobs change through the buttons, which call services)."""
        if request.method != "GET":
            raise PermissionDenied
        return rendered_in_snapshot(lambda: self._job_page(request, object_id))

    def _job_page(self, request, object_id):
        job = self._job_or_404(request, object_id)
        if not self.has_view_permission(request, job):
            raise PermissionDenied
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": f"{job.task} …{str(job.job_id)[-8:]}",
            **job_page(
                job,
                can_retry=self.has_retry_permission(request),
                can_cancel=self.has_cancel_permission(request),
                can_remove=self.has_remove_permission(request),
                request=request,
            ),
            "audit_entries": audit_entries_for(object_type="job", object_id=job.job_id),
        }
        fragment = request.GET.get("fragment")
        return TemplateResponse(
            request, "admin/jobs/job/page_body.html" if fragment else "admin/jobs/job/page.html", context
        )

    def _job_or_404(self, request, object_id) -> Job:
        job = self.get_object(request, object_id)
        if job is None:  # deleted (or never was): the page and its live refresh say so
            raise Http404(f"No job {object_id}.")
        return job

    def job_action_view(self, request, object_id, action):
        """Retry, Cancel or Delete from the job's page: a POST (Delete asks on a page first)."""
        allowed = {"retry": self.has_retry_permission, "cancel": self.has_cancel_permission}
        allowed["delete"] = self.has_remove_permission
        if action not in allowed or not allowed[action](request):
            raise PermissionDenied
        if request.method != "POST":
            if action != "delete":
                return HttpResponseNotAllowed(["POST"])
            return rendered_in_snapshot(lambda: self._delete_confirmation(request, object_id))
        job = self._job_or_404(request, object_id)
        selection = services.Selection.of_ids([job.job_id])
        by = request.user.get_username()
        calls = {
            "retry": lambda: services.jobs_retry(selection=selection, by=by),
            "cancel": lambda: services.jobs_cancel(selection=selection, by=by),
            "delete": lambda: services.jobs_delete(selection=selection),
        }
        counts = audited_call(
            calls[action],
            request=request,
            action=f"job.{action}",
            objects=[job.job_id],
            count=lambda counts: counts.changed,
            detail=lambda counts: {"requested": counts.requested},
        )
        if action == "retry":
            done = "put back in its queue for a new run" if counts.changed else f"not retried: it is {job.status}"
        elif action == "cancel":
            done = "canceled" if counts.changed else ("asked to stop" if counts.requested else "already finished")
        else:
            if counts.changed:
                self.message_user(request, f"Job {job.job_id} deleted with its events.")
                return redirect(reverse("admin:jobs_job_changelist"))
            done = "not deleted: it is running"
        self.message_user(
            request,
            f"Job {job.job_id}: {done}.",
            messages.SUCCESS if counts.changed or counts.requested else messages.WARNING,
        )
        return redirect(reverse("admin:jobs_job_change", args=[job.job_id]))

    def _delete_confirmation(self, request, object_id):
        job = self._job_or_404(request, object_id)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "Delete this job?",
            "job": job,
            "events": selectors.job_event_count(job_id=job.job_id),
        }
        return TemplateResponse(request, "admin/jobs/job/delete_confirmation.html", context)
