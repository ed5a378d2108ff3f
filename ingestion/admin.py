from django.contrib import admin, messages

from ingestion import pipeline
from ingestion.models import IngestionItem, IngestionRun, Source
from pipeline_project.core.admin import ReadOnlyAdminMixin
from pipeline_project.core.errors import ApplicationError


@admin.action(description="Run the selected sources", permissions=["run"])
def run_sources(modeladmin, request, queryset):
    for source in queryset:
        try:
            run = pipeline.run_start(source_id=source.id)
        except ApplicationError as error:
            modeladmin.message_user(request, f"{source.name}: {error.message}", messages.ERROR)
        else:
            modeladmin.message_user(request, f"{source.name}: run {run.id} started (see /pipeline/).")


@admin.register(Source)
class SourceAdmin(admin.ModelAdmin):
    list_display = ["name", "start_url", "enabled", "max_documents", "created_at"]
    list_filter = ["enabled"]
    search_fields = ["name", "start_url"]
    actions = [run_sources]

    def has_run_permission(self, request) -> bool:
        return request.user.has_perm("ingestion.add_ingestionrun")


@admin.register(IngestionRun)
class IngestionRunAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Runs are created by Run and moved by their jobs; the admin reads them."""

    list_display = ["id", "source", "status", "active_stage", "created_at", "finished_at", "error_message"]
    list_filter = ["status", "active_stage", "source"]
    search_fields = ["id"]
    ordering = ["-created_at"]
    list_select_related = ["source"]
    show_full_result_count = False


@admin.register(IngestionItem)
class IngestionItemAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["item_key", "run", "stage", "item_type", "status", "needs_review", "updated_at"]
    list_filter = ["stage", "item_type", "status", "needs_review"]
    search_fields = ["item_key", "document_url", "filename"]
    ordering = ["-id"]
    list_per_page = 100
    show_full_result_count = False
