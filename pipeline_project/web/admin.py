"""The admin pieces every app's admin is built from: read-only rows that services change, and
change lists of tables that grow without bound."""

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.views.main import ChangeList
from django.contrib.auth import get_permission_codename
from django.core.exceptions import ValidationError


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
