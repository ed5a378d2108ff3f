from functools import partial
from urllib.parse import urlsplit

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.utils.html import format_html

from ingestion import politeness, services
from ingestion.fetching import origin_of
from ingestion.models import IngestionItem, IngestionRun, Source
from pipeline_project.api.errors import ApplicationError
from pipeline_project.audit.actions import may
from pipeline_project.audit.services import audited_call
from pipeline_project.web.admin import ReadOnlyAdminMixin

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
            run = audited_call(
                partial(services.run_start, source_id=source.id),
                request=request,
                action="run.start",
                objects=[source.id],
                detail=lambda run: {"run": str(run.id)},
            )
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
