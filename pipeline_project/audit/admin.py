from django.contrib import admin
from django.db.models import Q
from django.utils.html import format_html

from pipeline_project.audit.models import AuditEntry
from pipeline_project.web.admin import KeysetAdminMixin, ReadOnlyAdminMixin


@admin.register(AuditEntry)
class AuditEntryAdmin(KeysetAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    """The audit trail: every operator action, newest first, by index however many there are."""

    list_display = ["at", "actor", "via", "address", "action", "objects", "filter_shown", "count"]
    list_filter = ["action", "via", "object_type"]
    search_fields = ["actor"]  # the box; the search itself is exact (below)
    search_help_text = "Exact user (token:<name> for a token), or an object's id"
    list_per_page = 100
    actions = None

    def get_search_results(self, request, queryset, search_term):
        term = search_term.strip()
        if not term:
            return queryset, False
        return queryset.filter(Q(actor=term) | Q(object_ids__contains=[term])), False

    @admin.display(description="objects")
    def objects(self, obj):
        shown = ", ".join(obj.object_ids[:5])
        more = len(obj.object_ids) - 5
        return format_html("{}{}", shown, f" and {more} more" if more > 0 else "")

    @admin.display(description="filter")
    def filter_shown(self, obj):
        return "" if obj.filter is None else format_html("<code>{}</code>", obj.filter)
