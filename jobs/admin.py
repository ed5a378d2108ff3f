import uuid
from datetime import UTC, timedelta

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import BooleanField, ExpressionWrapper, Q
from django.template.response import TemplateResponse
from django.urls import path
from django.utils import timezone

from jobs import selectors, services
from jobs.models import Job, JobEvent, JobStatus, Worker
from pipeline_project.core.admin import ReadOnlyAdminMixin
from pipeline_project.core.errors import ConflictError, NotFoundError

THROUGHPUT_MINUTES = 60
AXIS_LABEL_EVERY_MINUTES = 15


class JobEventInline(ReadOnlyAdminMixin, admin.TabularInline):
    """The journal is append-only; services write it together with the job."""

    model = JobEvent
    fields = ["event_id", "ts", "kind", "payload"]
    readonly_fields = fields
    ordering = ["event_id"]
    extra = 0
    can_delete = False


@admin.register(Job)
class JobAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Jobs are created by producers and change only through services (the actions below)."""

    list_display = [
        "job_id",
        "queue",
        "task",
        "status",
        "attempts",
        "lock_key",
        "priority",
        "available_at",
        "created_at",
        "finished_at",
    ]
    list_filter = ["status", "queue", "task"]
    search_fields = ["job_id", "idempotency_key", "lock_key"]
    search_help_text = "Exact job id, idempotency key or lock key"
    ordering = ["-job_id"]  # UUIDv7: newest first, read straight off the primary key
    list_per_page = 100
    show_full_result_count = False
    inlines = [JobEventInline]
    actions = ["retry_jobs", "cancel_jobs"]
    change_list_template = "admin/jobs/job/change_list.html"

    @admin.display(description="attempt")
    def attempts(self, obj):
        return f"{obj.attempt}/{obj.max_attempts}"

    def get_search_results(self, request, queryset, search_term):
        # Exact matches only: no LIKE scans over a table of millions of rows.
        term = search_term.strip()
        if not term:
            return queryset, False
        matches = Q(idempotency_key=term) | Q(lock_key=term)
        try:
            matches |= Q(job_id=uuid.UUID(term))
        except ValueError:
            pass  # not a job id; the keys may still match
        return queryset.filter(matches), False

    @admin.action(description="Retry selected jobs (failed, canceled or lost only)", permissions=["repair"])
    def retry_jobs(self, request, queryset):
        retried = skipped = 0
        for job_id in queryset.values_list("job_id", flat=True):
            if services.job_retry(job_id=job_id, requested_by=request.user.get_username()):
                retried += 1
            else:
                skipped += 1
        self.message_user(
            request,
            f"{retried} job(s) put back in their queue with attempts reset; "
            f"{skipped} job(s) were not failed, canceled or lost and were left alone.",
        )

    @admin.action(description="Cancel selected jobs", permissions=["repair"])
    def cancel_jobs(self, request, queryset):
        canceled = requested = skipped = 0
        for job_id, status in queryset.values_list("job_id", "status"):
            # A repeated cancel is harmless to the service but is not a cancellation now.
            if status == JobStatus.CANCELED:
                skipped += 1
                continue
            try:
                new_status = services.job_cancel(job_id=job_id, requested_by=request.user.get_username())
            except (ConflictError, NotFoundError):  # finished (or pruned) since the list was read
                skipped += 1
                continue
            if new_status == JobStatus.RUNNING:
                requested += 1
            else:
                canceled += 1
        self.message_user(
            request,
            f"{canceled} queued job(s) canceled; cancellation requested for {requested} running job(s); "
            f"{skipped} job(s) had already finished and were left alone.",
        )

    def get_urls(self):
        dashboard = self.admin_site.admin_view(self.dashboard_view)
        return [path("dashboard/", dashboard, name="jobs_job_dashboard"), *super().get_urls()]

    def dashboard_view(self, request):
        if not self.has_view_permission(request):
            raise PermissionDenied
        throughput = _throughput_columns(selectors.throughput(minutes=THROUGHPUT_MINUTES))
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Jobs dashboard",
            "queues": _queue_bars(selectors.queue_depths()),
            "workers": selectors.live_workers(),
            "throughput": throughput,
            "throughput_minutes": THROUGHPUT_MINUTES,
            "succeeded_total": sum(column["succeeded"] for column in throughput),
            "failed_total": sum(column["failed"] for column in throughput),
        }
        return TemplateResponse(request, "admin/jobs/dashboard.html", context)


def _queue_bars(depths: dict[str, dict[str, int]]) -> list[dict]:
    """One stacked bar per queue, scaled to the largest queue so bar lengths compare."""
    totals = {queue: sum(counts.values()) for queue, counts in depths.items()}
    widest = max(totals.values(), default=0) or 1
    return [
        {
            "name": queue,
            "total": totals[queue],
            "segments": [
                {"status": status, "count": counts[status], "percent": round(100 * counts[status] / widest, 2)}
                for status in JobStatus.values
                if counts.get(status)
            ],
        }
        for queue, counts in depths.items()
    ]


def _throughput_columns(rows: list[dict]) -> list[dict]:
    """One column per minute of the window, quiet minutes included, so the time axis is even."""
    by_minute = {row["minute"]: row for row in rows}
    this_minute = timezone.now().replace(second=0, microsecond=0)
    first = this_minute - timedelta(minutes=THROUGHPUT_MINUTES)
    # A database clock slightly ahead of ours may report a minute past our "now".
    last = max([this_minute, *by_minute])
    window = [
        {"minute": minute, "succeeded": 0, "failed": 0, **by_minute.get(minute, {})}
        for minute in (
            first + timedelta(minutes=offset) for offset in range((last - first) // timedelta(minutes=1) + 1)
        )
    ]
    peak = max((column["succeeded"] + column["failed"] for column in window), default=0) or 1
    return [
        {
            **column,
            "key": column["minute"].astimezone(UTC).strftime("%Y-%m-%dT%H:%MZ"),
            "label": timezone.localtime(column["minute"]).strftime("%H:%M")
            if column["minute"].minute % AXIS_LABEL_EVERY_MINUTES == 0
            else "",
            "succeeded_percent": round(100 * column["succeeded"] / peak, 2),
            "failed_percent": round(100 * column["failed"] / peak, 2),
        }
        for column in window
    ]


@admin.register(Worker)
class WorkerAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Rows belong to runworker processes: they register, heartbeat and deregister themselves."""

    list_display = ["hostname", "pid", "queue_concurrency", "running_jobs", "started_at", "heartbeat_at", "live"]
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

    @admin.display(boolean=True, description="live", ordering="is_live")
    def live(self, obj):
        return obj.is_live
