import uuid
from urllib.parse import urlsplit

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin import ShowFacets
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.urls import reverse
from django.utils.html import format_html

from ingestion import politeness, selectors
from ingestion.fetching import origin_of
from ingestion.models import IngestionItem, IngestionRun, Source
from ingestion.pages import run_started
from ingestion.templatetags.run_page import took, why
from pipeline_project.api.errors import ApplicationError
from pipeline_project.audit.actions import may
from pipeline_project.web.admin import KeysetAdminMixin, ReadOnlyAdminMixin
from pipeline_project.web.times import moment_html

MAX_HOSTS = 100


class HostsField(forms.CharField):
    """A list of host names, one a line (stored as a JSON list, lower-case)."""

    widget = forms.Textarea(attrs={"rows": 3, "cols": 60})

    def prepare_value(self, value):
        return "\n".join(value) if isinstance(value, list) else value

    def to_python(self, value):
        hosts = [line.strip().lower().rstrip(".") for line in (super().to_python(value) or "").splitlines()]
        hosts = list(dict.fromkeys(host for host in hosts if host))
        if len(hosts) > MAX_HOSTS:
            raise ValidationError(f"At most {MAX_HOSTS} hosts.")
        return [self._host(host) for host in hosts]

    @staticmethod
    def _host(text: str) -> str:
        """A host name as fetching compares it (the URL's hostname: no scheme, port or path)."""
        problem = ValidationError(f"{text!r} is not a host name (no scheme, port or path).")
        try:
            URLValidator(schemes=["http"])(f"http://{text}/")
            parts = urlsplit(f"http://{text}/")
            if parts.port is not None or parts.path != "/" or not parts.hostname:
                raise problem
        except (ValidationError, ValueError):
            raise problem from None
        return parts.hostname


class SourceForm(forms.ModelForm):
    allowed_hosts = HostsField(
        required=False, help_text="Hosts links may lead to, one a line; empty: the start URL's host"
    )

    class Meta:
        model = Source
        fields = "__all__"

    def clean_start_url(self):
        url = self.cleaned_data["start_url"]
        URLValidator(schemes=["http", "https"])(url)
        return url


@admin.action(description="Run the selected sources", permissions=["run"])
def run_sources(modeladmin, request, queryset):
    for source in queryset:
        try:
            run = run_started(request, source_id=source.id)
        except ApplicationError as error:
            modeladmin.message_user(request, f"{source.name}: {error.message}", messages.ERROR)
        else:
            modeladmin.message_user(request, f"{source.name}: run {run.id} started (see /pipeline/).")


@admin.register(Source)
class SourceAdmin(admin.ModelAdmin):
    form = SourceForm
    list_display = [
        "name",
        "start_url",
        "enabled",
        "max_documents",
        "obey_robots_txt",
        "max_concurrent_per_host",
        "crawl_delay_sec",
        "created_at",
    ]
    list_filter = ["enabled", "obey_robots_txt"]
    search_fields = ["name", "start_url"]
    actions = [run_sources]
    readonly_fields = ["user_agent", "robots_txt", "created_at"]
    fieldsets = [
        (None, {"fields": ["name", "start_url", "enabled", "allowed_hosts", "max_documents", "max_bytes"]}),
        (
            "Crawling politely",
            {
                "fields": [
                    "user_agent",
                    "obey_robots_txt",
                    "robots_txt",
                    "max_concurrent_per_host",
                    "crawl_delay_sec",
                ],
                "description": "Limits hold across every worker: they are kept in the database.",
            },
        ),
        (None, {"fields": ["created_at"]}),
    ]

    def has_run_permission(self, request) -> bool:
        return may(request.user, "run.start")

    @admin.display(description="User-Agent")
    def user_agent(self, obj) -> str:
        return format_html("<code>{}</code> (INGESTION_USER_AGENT)", settings.INGESTION_USER_AGENT)

    @admin.display(description="robots.txt of the start URL's host")
    def robots_txt(self, obj) -> str:
        if obj is None or not obj.pk:
            return "read before the first request to each host, and kept for every worker"
        try:
            origin = origin_of(obj.start_url)[0]
        except ValueError:
            return "–"
        robots = politeness.robots_cached(origin)
        if robots is None:
            return format_html("{}/robots.txt: not read recently", origin)
        allowed = "allows" if robots.allows(obj.start_url) else "does not allow"
        answer = "no answer" if robots.status_code is None else f"HTTP {robots.status_code}"
        delay = robots.crawl_delay()
        return format_html(
            "{}/robots.txt ({}): {} the start URL{}",
            origin,
            answer,
            allowed,
            f"; Crawl-delay {delay:g} s" if delay else "",
        )


def _run_link(run_id) -> str:
    return format_html('<a href="{}">Run {}</a>', reverse("ingestion-run", args=[run_id]), str(run_id)[:8])


@admin.register(IngestionRun)
class IngestionRunAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Runs are created by Run and moved by their jobs; the admin reads them (its /pipeline page shows each whole)."""

    list_display = ["run", "source", "status", "active_stage", "created", "took", "error_message"]
    list_display_links = None  # each run links to its /pipeline page, which shows it whole
    list_filter = ["status", "active_stage", "source"]
    search_fields = ["=id"]
    search_help_text = "Exact run id"
    ordering = ["-created_at"]
    list_select_related = ["source"]
    show_full_result_count = False
    show_facets = ShowFacets.NEVER  # a facet's count would read every run

    @admin.display(description="run")
    def run(self, obj):
        return _run_link(obj.id)

    @admin.display(description="created")
    def created(self, obj):
        return moment_html(obj.created_at)

    @admin.display(description="took")
    def took(self, obj):
        return took(obj)


# The item list's filters its count is kept for (ingestion_run_counts): one run, by stage and status.
COUNTED_FILTERS = {"run", "stage__exact", "status__exact"}


@admin.register(IngestionItem)
class IngestionItemAdmin(KeysetAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    """Items of every run, newest first a page at a time (a run may have 100,000, a year millions)."""

    list_display = ["item", "run_shown", "stage", "item_type", "status", "why", "needs_review", "updated"]
    list_filter = ["stage", "item_type", "status", "needs_review"]
    search_fields = ["item_key", "document_url", "filename"]
    list_per_page = 100
    show_facets = ShowFacets.NEVER  # a facet's count would read every item

    def keyset_count(self, request, changelist) -> int | None:
        """One run's items of a stage and status, from the run's counts; unknown for other filters."""
        filters = changelist.get_filters_params()
        if "run" not in filters or set(filters) - COUNTED_FILTERS:
            return None
        try:
            run_id = uuid.UUID(request.GET["run"])
        except ValueError:
            return None
        return selectors.run_item_count(
            run_id=run_id, stage=request.GET.get("stage__exact"), status=request.GET.get("status__exact")
        )

    @admin.display(description="item")
    def item(self, obj):
        return obj.item_label or obj.document_url or obj.item_key

    @admin.display(description="run")
    def run_shown(self, obj):
        return _run_link(obj.run_id)

    @admin.display(description="why")
    def why(self, obj):
        return why(obj)

    @admin.display(description="updated")
    def updated(self, obj):
        return moment_html(obj.updated_at)
