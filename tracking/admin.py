from django.contrib import admin
from django.contrib.admin import ShowFacets
from django.contrib.admin.options import IncorrectLookupParameters
from django.core.exceptions import PermissionDenied
from django.db.models import Q
from django.template.response import TemplateResponse
from django.urls import path

from pipeline_project.api.fields import INT32_MAX
from pipeline_project.audit.services import audited_call
from pipeline_project.db.counts import sum_matching
from pipeline_project.web.admin import KEYSET_VAR, KeysetAdminMixin, ReadOnlyAdminMixin, ReadOnlyTabularInline
from pipeline_project.web.query import query_int
from tracking import selectors, services
from tracking.models import QUEUE_STAGES, STAGES, PipelineTracking, Stage, StageChange, Status

WORST_SHARDS = 20  # the summary's shards drawn one by one: the rest are counted


class StageHistoryInline(ReadOnlyTabularInline):
    """Each stage status the row was given, in order (a trigger records them)."""

    model = StageChange
    fields = ["changed_at", "stage", "status"]
    ordering = ["id"]
    verbose_name_plural = "stage history"


def _retry_action(stage: Stage):
    def retry(modeladmin, request, queryset):
        row_ids = list(queryset.values_list("pk", flat=True))
        # The rows are in the pipeline database: the entry is written after, in the default one.
        changed = audited_call(
            lambda: services.stage_retry_failed(stage=stage, row_ids=row_ids),
            request=request,
            action="tracking.retry",
            objects=row_ids,
            count=int,
            detail=lambda changed: {"stage": stage.slug},
        )
        skipped = queryset.count() - changed
        modeladmin.message_user(
            request,
            f"{stage.slug}: {changed} failed row(s) set back to new; {skipped} row(s) were not failed and were left alone.",
        )

    retry.__name__ = f"retry_{stage.key}"
    return admin.action(description=f"Retry {stage.slug} (failed rows only)", permissions=["repair"])(retry)


class FailedAnywhereFilter(admin.SimpleListFilter):
    """Rows failed at any stage (what the summary's per-shard "failed" counts)."""

    title = "failed at any stage"
    parameter_name = "failed_anywhere"

    def lookups(self, request, model_admin):
        return [("yes", "Yes")]

    def queryset(self, request, queryset):
        if self.value() != "yes":
            return queryset
        failed = Q()
        for stage in STAGES.values():
            failed |= Q(**{stage.column: "failed"})
        return queryset.filter(failed)


class ShardFilter(admin.SimpleListFilter):
    """A shard typed in (a file may have thousands), or one of the few with the most failed rows,
    from the counts the triggers keep (not a read of every row)."""

    title = parameter_name = "shard"
    template = "admin/tracking/pipelinetracking/shard_filter.html"
    LISTED = 10

    def lookups(self, request, model_admin):
        return [
            (str(shard), f"{shard} ({failed} failed)")
            for shard, failed in selectors.shards_most_failed(limit=self.LISTED)
        ]

    def choices(self, changelist):
        # The form that types a shard in keeps the list's other filters and its search.
        self.kept = [(name, value) for name, value in changelist.params.items() if name not in ("shard", KEYSET_VAR)]
        yield from super().choices(changelist)

    def queryset(self, request, queryset):
        value = self.value()
        if not value:  # the typed-in form sent empty: every shard
            return queryset
        shard = query_int(value)
        if shard is None or shard > INT32_MAX:  # the admin answers "?e=1", not a 500
            raise IncorrectLookupParameters(f"shard={value[:20]!r} is no shard (0 to {INT32_MAX})")
        return queryset.filter(shard=shard)


@admin.register(PipelineTracking)
class PipelineTrackingAdmin(KeysetAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    """Rows are created and moved by daemons; the admin only repairs, through actions."""

    list_display = ["filename", "shard", *selectors.STATUS_COLUMNS, "created_at", "updated_at"]
    list_filter = [*selectors.STATUS_COLUMNS, FailedAnywhereFilter, ShardFilter]
    show_facets = ShowFacets.NEVER  # a facet's count would read every row
    search_fields = ["filename"]
    search_help_text = "Filename prefix"
    list_per_page = 100

    def keyset_count(self, request, changelist) -> int | None:
        """The rows the filters match, from the counts."""
        wanted = [
            request.GET.get("shard"),
            *(request.GET.get(f"{column}__exact") for column in selectors.STATUS_COLUMNS),
        ]
        rows = selectors.counts()
        if request.GET.get("failed_anywhere") == "yes":
            rows = [row for row in rows if "failed" in row[1:-1]]  # a stage's status among the values
        return sum_matching(rows, wanted)

    actions = [_retry_action(stage) for stage in QUEUE_STAGES.values()]
    inlines = [StageHistoryInline]
    change_list_template = "admin/tracking/pipelinetracking/change_list.html"

    def get_search_results(self, request, queryset, search_term):
        # A case-sensitive prefix match is what the filename prefix index can serve.
        if not search_term:
            return queryset, False
        return queryset.filter(filename__startswith=search_term.strip()), False

    def get_urls(self):
        summary = self.admin_site.admin_view(self.summary_view)
        return [path("summary/", summary, name="tracking_pipelinetracking_summary"), *super().get_urls()]

    def summary_view(self, request):
        if not self.has_view_permission(request):
            raise PermissionDenied
        summary = selectors.metrics_summary()
        shards = selectors.shards_summary(worst=WORST_SHARDS)
        stages = []
        for stage in STAGES.values():
            counts = summary["by_stage"][stage.key]
            total = sum(counts.values()) or 1
            stages.append(
                {
                    "slug": stage.slug,
                    "column": stage.column,
                    "counts": counts,
                    "shards": shards["by_stage"][stage.key],
                    "segments": [
                        {"status": status, "count": count, "percent": round(100 * count / total, 2)}
                        for status, count in counts.items()
                    ],
                }
            )
        widest = max((row["total"] for row in shards["worst"]), default=0) or 1
        worst = [
            {
                **row,
                "done_percent": round(100 * row["done"] / widest, 2),
                "failed_percent": round(100 * row["failed"] / widest, 2),
                "other_percent": round(100 * (row["total"] - row["done"] - row["failed"]) / widest, 2),
            }
            for row in shards["worst"]
        ]
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Pipeline summary",
            "total": summary["total"],
            "stages": stages,
            "statuses": Status.values,
            "shards": shards,
            "worst": worst,
        }
        return TemplateResponse(request, "admin/tracking/summary.html", context)
