"""A job's page in the admin: the page itself (its journal, data and errors, live), and its
Retry, Cancel and Delete buttons, each calling one service once confirmed: by the page's dialog
(its form then says ``confirmed=yes``), or else on a page asking the same question."""

from urllib.parse import urlencode

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponseNotAllowed
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse

from jobs.queue import services
from jobs.queue.console.job_page import job_page
from jobs.queue.models import Job
from pipeline_project.audit.selectors import audit_entries_for
from pipeline_project.audit.services import audited_call
from pipeline_project.db.snapshot import rendered_in_snapshot

ACTED = {"retry": "retried", "cancel": "canceled", "delete": "deleted"}


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
            **self._way_back(request),
        }
        fragment = request.GET.get("fragment")
        return TemplateResponse(
            request, "admin/jobs/job/page_body.html" if fragment else "admin/jobs/job/page.html", context
        )

    def _way_back(self, request) -> dict:
        """The list as it was filtered when the job was opened from it (the admin's preserved
        filters), and the query that keeps them through the buttons."""
        filters = request.GET.get("_changelist_filters", "")
        return {
            "list_url": reverse("admin:jobs_job_changelist") + (f"?{filters}" if filters else ""),
            "preserved_query": f"?{urlencode({'_changelist_filters': filters})}" if filters else "",
        }

    def _job_or_404(self, request, object_id) -> Job:
        job = self.get_object(request, object_id)
        if job is None:  # deleted (or never was): the page and its live refresh say so
            raise Http404(f"No job {object_id}.")
        return job

    def job_action_view(self, request, object_id, action):
        """Retry, Cancel or Delete from the job's page: a confirmed POST; a GET, or a POST not yet
        confirmed, answers the page asking first."""
        allowed = {"retry": self.has_retry_permission, "cancel": self.has_cancel_permission}
        allowed["delete"] = self.has_remove_permission
        if action not in allowed or not allowed[action](request):
            raise PermissionDenied
        if request.method not in ("GET", "POST"):
            return HttpResponseNotAllowed(["GET", "POST"])
        if request.method == "GET" or request.POST.get("confirmed") != "yes":
            return rendered_in_snapshot(lambda: self._confirmation(request, object_id, action))
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
                return redirect(self._way_back(request)["list_url"])
            done = "not deleted: it is running"
        self.message_user(
            request,
            f"Job {job.job_id}: {done}.",
            messages.SUCCESS if counts.changed or counts.requested else messages.WARNING,
        )
        return redirect(
            reverse("admin:jobs_job_change", args=[job.job_id]) + self._way_back(request)["preserved_query"]
        )

    def _confirmation(self, request, object_id, action):
        job = self._job_or_404(request, object_id)
        page = job_page(
            job,
            can_retry=self.has_retry_permission(request),
            can_cancel=self.has_cancel_permission(request),
            can_remove=self.has_remove_permission(request),
        )
        question = page["questions"].get(action)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": question.split("?")[0] + "?" if question else f"This job cannot be {ACTED[action]} now",
            "job": job,
            "action": action,
            "question": question,
            "state": page["state"],
            **self._way_back(request),
        }
        return TemplateResponse(request, "admin/jobs/job/page_confirmation.html", context)
