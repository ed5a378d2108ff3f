from django.contrib import admin, messages
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.views.main import ChangeList
from django.contrib.auth import get_permission_codename
from django.core.exceptions import ValidationError
from django.utils import timezone

from pipeline_project.core import services
from pipeline_project.core.models import ApiToken


class ReadOnlyAdminMixin:
    """For rows that only services change: no add, change or delete in the admin.

    Repair actions (``@admin.action(permissions=["repair"])``) call services; they need the
    model's change permission, which is otherwise unused here.
    """

    def has_repair_permission(self, request):
        return request.user.has_perm(f"{self.opts.app_label}.{get_permission_codename('change', self.opts)}")

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class ReadOnlyTabularInline(ReadOnlyAdminMixin, admin.TabularInline):
    """Rows shown under their parent as services wrote them: every listed field read-only."""

    extra = 0
    can_delete = False

    def get_readonly_fields(self, request, obj=None):
        return self.fields


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "key_prefix", "is_active", "created_at", "created_by", "last_used_at", "revoked_at"]
    list_filter = [("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["name", "key_prefix"]
    readonly_fields = ["key_prefix", "created_at", "created_by", "last_used_at", "revoked_at"]
    fields = ["name", *readonly_fields]
    actions = ["revoke_tokens"]

    @admin.display(boolean=True, description="active")
    def is_active(self, obj):
        return obj.is_active

    def save_model(self, request, obj, form, change):
        if change:
            super().save_model(request, obj, form, change)
            return
        token, key = services.api_token_create(name=obj.name, created_by=request.user)
        obj.__dict__.update({field.attname: getattr(token, field.attname) for field in ApiToken._meta.concrete_fields})
        obj._state.adding = False
        messages.warning(
            request, f"Token for “{token.name}”: {key} — copy it now; it is stored hashed and will not be shown again."
        )

    @admin.action(description="Revoke selected tokens", permissions=["change"])
    def revoke_tokens(self, request, queryset):
        count = 0
        for token_id in queryset.filter(revoked_at__isnull=True).values_list("pk", flat=True):
            services.api_token_revoke(token_id=token_id)
            count += 1
        self.message_user(request, f"Revoked {count} token(s) at {timezone.now():%Y-%m-%d %H:%M:%S} UTC.")


KEYSET_VAR = "before"


class KeysetChangeList(ChangeList):
    """The change list of a table of millions of rows: it never counts them, and it pages by the
    key it is ordered by, newest first (``KeysetAdminMixin.keyset``): "Older" shows the rows
    before the last one shown, one index range however deep the page. How many rows match is
    what the admin's ``keyset_count`` says (counts the triggers keep), or unknown."""

    keyset = True  # the pagination template asks

    def get_filters_params(self, params=None):
        lookup_params = super().get_filters_params(params)
        lookup_params.pop(KEYSET_VAR, None)
        return lookup_params

    def get_results(self, request):
        self.params.pop(KEYSET_VAR, None)  # a new filter or search starts at the newest rows
        key = self.model_admin.keyset
        before = request.GET.get(KEYSET_VAR)
        queryset = self.queryset
        if before:
            try:
                queryset = queryset.filter(**{f"{key}__lt": self.model._meta.get_field(key).to_python(before)})
            except ValidationError:
                raise IncorrectLookupParameters(f"{KEYSET_VAR}={before!r} is not a {key}") from None
        rows = list(queryset.order_by(f"-{key}")[: self.list_per_page + 1])
        self.result_list = rows[: self.list_per_page]
        self.older_url = (
            self.get_query_string({KEYSET_VAR: getattr(rows[self.list_per_page - 1], key)})
            if len(rows) > self.list_per_page
            else None
        )
        self.newest_url = self.get_query_string() if before else None
        counted = None if self.query else self.model_admin.keyset_count(request, self)  # a search's is unknown
        self.counted = counted is not None
        # Unknown: as many as shown, and one more if there are older ones (for "Select all").
        self.result_count = counted if self.counted else len(self.result_list) + bool(self.older_url)
        self.full_result_count = self.result_count  # no "N results (M total)": M would be a count
        self.show_full_result_count = False
        self.can_show_all = self.multi_page = False
        self.show_admin_actions = True


class KeysetAdminMixin:
    """For a ModelAdmin of a big table: its list pages by ``keyset`` (its ordering, newest first)
    and sorts by nothing else (a sort by another column would read the whole table)."""

    keyset = "id"
    sortable_by = ()

    def get_changelist(self, request, **kwargs):
        return KeysetChangeList

    def get_ordering(self, request):
        return [f"-{self.keyset}"]

    def keyset_count(self, request, changelist) -> int | None:
        """How many rows the list's filters match (it is not searched), if known without counting them."""
        return None
