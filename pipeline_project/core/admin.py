from django.contrib import admin, messages
from django.utils import timezone

from pipeline_project.audit.services import audited_call
from pipeline_project.core import services
from pipeline_project.core.models import ApiToken


class TokenStateFilter(admin.SimpleListFilter):
    """Active or revoked (tokens do not expire: a token works until it is revoked)."""

    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [("active", "Active"), ("revoked", "Revoked")]

    def queryset(self, request, queryset):
        if self.value() in ("active", "revoked"):
            return queryset.filter(revoked_at__isnull=self.value() == "active")
        return queryset


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "key_prefix",
        "scopes",
        "is_active",
        "created_at",
        "created_by",
        "last_used_at",
        "revoked_at",
    ]
    list_filter = [TokenStateFilter]
    search_fields = ["name", "key_prefix"]
    readonly_fields = ["key_prefix", "created_at", "created_by", "last_used_at", "revoked_at"]
    fields = ["name", "scopes", *readonly_fields]
    actions = ["revoke_tokens"]

    @admin.display(boolean=True, description="active")
    def is_active(self, obj):
        return obj.is_active

    def save_model(self, request, obj, form, change):
        if change:
            super().save_model(request, obj, form, change)
            return
        token, key = services.api_token_create(name=obj.name, scopes=obj.scopes, created_by=request.user)
        obj.__dict__.update({field.attname: getattr(token, field.attname) for field in ApiToken._meta.concrete_fields})
        obj._state.adding = False
        messages.warning(
            request, f"Token for “{token.name}”: {key} — copy it now; it is stored hashed and will not be shown again."
        )

    @admin.action(description="Revoke selected tokens", permissions=["change"])
    def revoke_tokens(self, request, queryset):
        token_ids = list(queryset.filter(revoked_at__isnull=True).values_list("pk", flat=True))
        revoked = audited_call(
            lambda: [services.api_token_revoke(token_id=token_id) for token_id in token_ids],
            request=request,
            action="token.revoke",
            objects=token_ids,
            count=len,
        )
        count = len(revoked)
        self.message_user(request, f"Revoked {count} token(s) at {timezone.now():%Y-%m-%d %H:%M:%S} UTC.")
