import json
import uuid
from contextlib import suppress

from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.db.models import BooleanField, ExpressionWrapper, Q
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from jobs.queue import selectors, services
from jobs.queue.console.admin_dashboard import DashboardAdminMixin
from jobs.queue.console.admin_job_page import JobPageAdminMixin
from jobs.queue.console.job_page import latest_runs
from jobs.queue.models import Job, PeriodicTask, Queue, Worker
from jobs.queue.states import JobStatus
from pipeline_project.audit.actions import may
from pipeline_project.audit.services import audited_call
from pipeline_project.db.counts import sum_matching
from pipeline_project.db.snapshot import rendered_in_snapshot
from pipeline_project.web.admin import KeysetAdminMixin, KeysetChangeList, ReadOnlyAdminMixin
from pipeline_project.web.arguments import search_refusal
from pipeline_project.web.times import ago, duration


def _cell(text: str):
    """A list cell's text, cut with an ellipsis at the column's width, all of it on hover."""
    return format_html('<span class="cell" title="{text}">{text}</span>', text=text)


class JobChangeList(KeysetChangeList):
    """The page's jobs, each with its latest run from the journal (its wait and run times)."""

    def get_results(self, request):
        super().get_results(request)
        self.result_list = list(self.result_list)
        runs = latest_runs(self.result_list)
        for job in self.result_list:
            job.latest_run = runs.get(job.job_id)


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
    list_filter = ["status", QueueFilter, TaskFilter]
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
        """The jobs the queue, task and status filters match, from the counts."""
        wanted = [request.GET.get("queue"), request.GET.get("task"), request.GET.get("status__exact")]
        return sum_matching(selectors.job_counts(), wanted)

    def changelist_view(self, request, extra_context=None):
        view = super().changelist_view
        if request.method != "GET":  # an action: it writes, and reads what it needs itself
            return view(request, extra_context)
        return rendered_in_snapshot(lambda: view(request, extra_context))

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
        return _cell(obj.queue)

    @admin.display(description="job", ordering="job_id")
    def short_id(self, obj):
        # The end of the id: a UUIDv7 starts with its timestamp, the same for jobs made together.
        return format_html('<span title="{}">…{}</span>', obj.job_id, str(obj.job_id)[-8:])

    @admin.display(description="status · attempt", ordering="status")
    def status_badge(self, obj):
        return format_html(
            '<span class="status-badge s-{s}">{s}</span> <span title="attempt {n} of {m}">{n}/{m}</span>',
            s=obj.display_status,
            n=obj.attempt,
            m=obj.max_attempts,
        )

    @admin.display(description="created", ordering="created_at")
    def created(self, obj):
        return format_html(
            '<time datetime="{}" title="{}">{}</time>',
            obj.created_at.isoformat(),
            obj.created_at.strftime("%Y-%m-%d %H:%M:%S %Z"),
            ago(obj.created_at),
        )

    @admin.display(description="waited · ran")
    def times(self, obj):
        """The latest run's (an operator's retry starts a run): the time it sat failed is neither."""
        run = getattr(obj, "latest_run", None)
        return _cell(f"{duration(run.waited)} · {duration(run.ran)}") if run else "–"

    @admin.display(description="error")
    def error_line(self, obj):
        first = (obj.error or "").split("\n", 1)[0]
        return _cell(first) if first else ""

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


@admin.register(Worker)
class WorkerAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Rows belong to runworker processes: they register, heartbeat and deregister themselves.
    A killed worker's row stays, marked dead, until the periodic task forgets it."""

    list_display = ["hostname", "pid", "queue_concurrency", "running", "started_at", "last_seen", "alive"]
    ordering = ["hostname", "pid"]

    def get_queryset(self, request):
        cutoff = selectors.live_worker_cutoff()
        return (
            super()
            .get_queryset(request)
            .annotate(is_live=ExpressionWrapper(Q(heartbeat_at__gte=cutoff), output_field=BooleanField()))
        )

    @admin.display(description="queues")
    def queue_concurrency(self, obj):
        return ", ".join(f"{queue} × {concurrency}" for queue, concurrency in obj.queues.items())

    @admin.display(description="running jobs", ordering="running_jobs")
    def running(self, obj):
        """Links to the jobs it runs now: those whose latest pick was by this worker."""
        name = f"{obj.hostname}:{obj.pid}:{str(obj.worker_id)[:8]}"  # as jobs.runtime.build.worker_name writes it
        jobs = Job.objects.filter(
            status=JobStatus.RUNNING, events__kind="picked", events__payload__worker=name
        ).distinct()
        links = [
            format_html(
                '<a href="{}" title="{}">{}</a>',
                reverse("admin:jobs_job_change", args=[job_id]),
                job_id,
                f"…{str(job_id)[-8:]}",
            )
            for job_id in jobs.values_list("job_id", flat=True)[:10]
        ]
        if not links:
            return str(obj.running_jobs)  # a count the worker reported, its jobs not found (yet)
        return format_html_join(", ", "{}", ((link,) for link in links))

    @admin.display(description="last seen", ordering="heartbeat_at")
    def last_seen(self, obj):
        return format_html(
            '<time title="{}">{}</time>', obj.heartbeat_at.strftime("%Y-%m-%d %H:%M:%S %Z"), ago(obj.heartbeat_at)
        )

    @admin.display(boolean=True, description="alive", ordering="is_live")
    def alive(self, obj):
        return obj.is_live


@admin.register(Queue)
class QueueAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Queues an operator paused (or resumed) or limited; the dashboard pauses and limits any queue."""

    list_display = [
        "name",
        "paused",
        "max_running",
        "rate_limit",
        "rate_period_sec",
        "limit_per_partition",
        "changed_at",
        "changed_by",
    ]


@admin.register(PeriodicTask)
class PeriodicTaskAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """The shared schedule of the queue's housekeeping; runworker processes keep it."""

    list_display = ["name", "last_started_at", "last_finished_at", "last_runner", "last_result"]
