"""Database states in the admin: prepare jobs with their tasks and events, states as a tree,
instances with their DSN and live connections, and deletion with a dry-run preview first."""

from django.contrib import admin, messages
from django.contrib.admin.options import ActionLocation
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from jobs.dbstates import deletion_tree, selectors, services
from jobs.dbstates.models import Instance, Name, PrepareEvent, PrepareJob, PrepareTask, State
from pipeline_project.api.errors import ApplicationError
from pipeline_project.audit.services import audited_call
from pipeline_project.db.snapshot import read_in_snapshot, snapshot
from pipeline_project.web.admin import ReadOnlyAdminMixin, ReadOnlyTabularInline

TREE_LIMIT = 500  # states drawn on the tree page


class PrepareTaskInline(ReadOnlyTabularInline):
    model = PrepareTask
    fields = [
        "task_id",
        "type",
        "status",
        "cached",
        "input_kind",
        "input_id",
        "output_state_id",
        "started_at",
        "finished_at",
    ]
    ordering = ["position"]


class PrepareEventInline(ReadOnlyTabularInline):
    model = PrepareEvent
    fields = ["seq", "ts", "type", "task_id", "status", "message", "error"]
    ordering = ["seq"]


class OneSnapshotPagesMixin:
    """A list page, or an object's page with its inlines, is read from one snapshot: rendered
    inside it (a template response reads its querysets when it renders)."""

    def changelist_view(self, request, extra_context=None):
        return read_in_snapshot(super().changelist_view)(request, extra_context)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        return read_in_snapshot(super().change_view)(request, object_id, form_url, extra_context)


class ServiceDeletionMixin:
    """Deletion goes through the engine's deletion service, never Django's cascade: the page shows
    the service's dry run (what would go, what blocks it) and the button runs it for real."""

    delete_options: tuple[str, ...] = ()  # flags the page offers: recurse, force

    def has_delete_permission(self, request, obj=None):
        return request.user.has_perm(f"{self.opts.app_label}.delete_{self.opts.model_name}")

    def get_actions(self, request, action_location=ActionLocation.CHANGE_LIST):
        actions = super().get_actions(request, action_location=action_location)
        actions.pop("delete_selected", None)  # one tree at a time, previewed
        return actions

    def delete_service(self, obj, **flags) -> deletion_tree.DeleteResult:
        raise NotImplementedError

    def delete_view(self, request, object_id, extra_context=None):
        obj = self.get_object(request, object_id)
        if obj is None:
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)
        if not self.has_delete_permission(request, obj):
            raise PermissionDenied
        source = request.POST if request.method == "POST" else request.GET
        flags = {name: source.get(name) == "on" for name in self.delete_options}
        try:
            preview = self.delete_service(obj, dry_run=True, **flags)
            if request.method == "POST" and preview.outcome == "would_delete":
                self.delete_service(obj, dry_run=False, **flags)
                self.message_user(request, f"Deleted {self.opts.verbose_name} {obj}.")
                return HttpResponseRedirect(reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_changelist"))
        except ApplicationError as error:
            self.message_user(request, error.message, messages.ERROR)
            preview = None
        if request.method == "POST" and preview is not None:
            self.message_user(request, "Nothing was deleted: the tree is blocked (see below).", messages.WARNING)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": f"Delete {self.opts.verbose_name} {obj}",
            "object": obj,
            "preview": preview.as_dict() if preview else None,
            "options": [(name, flags[name]) for name in self.delete_options],
        }
        return TemplateResponse(request, "admin/dbstates/delete_preview.html", context)


@admin.register(PrepareJob)
class PrepareJobAdmin(OneSnapshotPagesMixin, ServiceDeletionMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = [
        "job_id",
        "status",
        "prepare_kind",
        "image_id",
        "plan_only",
        "created_at",
        "finished_at",
        "error_code",
    ]
    list_filter = ["status", "prepare_kind", "plan_only"]
    search_fields = ["job_id__startswith"]
    search_help_text = "Job id prefix"
    ordering = ["-created_at"]
    list_per_page = 100
    inlines = [PrepareTaskInline, PrepareEventInline]
    readonly_fields = ["job_id", "status", "prepare_kind", "image_id", "resolved_image_id", "plan_only"]
    readonly_fields += ["prepare_args_normalized", "signature", "queue_job_id", "result", "error"]
    readonly_fields += ["created_at", "started_at", "finished_at"]
    fields = readonly_fields
    actions = ["cancel_jobs"]
    delete_options = ("force",)

    def has_view_permission(self, request, obj=None):
        return super().has_view_permission(request, obj) or self.has_repair_permission(request)

    @admin.display(description="error")
    def error_code(self, obj):
        return (obj.error or {}).get("code", "")

    @admin.action(permissions=["repair"], description="Cancel the selected queued or running jobs")
    def cancel_jobs(self, request, queryset):
        job_ids = list(queryset.values_list("pk", flat=True))
        cancelled = audited_call(
            lambda: sum(services.prepare_job_cancel(job_id=job_id) for job_id in job_ids),
            request=request,
            action="prepare_job.cancel",
            objects=job_ids,
            count=int,
        )
        self.message_user(request, f"Cancellation requested for {cancelled} job(s); finished ones were left alone.")

    def delete_service(self, obj, **flags):
        return services.prepare_job_delete(job_id=obj.job_id, **flags)


@admin.register(State)
class StateAdmin(OneSnapshotPagesMixin, ServiceDeletionMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["short_id", "parent_link", "prepare_args_normalized", "image_id", "size", "refcount", "use_count"]
    list_display += ["last_used_at", "created_at"]
    list_filter = ["prepare_kind", "engine_version"]
    search_fields = ["state_id__startswith"]
    search_help_text = "State id prefix"
    ordering = ["-created_at"]
    list_per_page = 100
    readonly_fields = ["state_id", "parent", "image_id", "engine_version", "prepare_kind", "prepare_args_normalized"]
    readonly_fields += ["task_hash", "size_bytes", "created_at", "last_used_at", "use_count", "min_retention_until"]
    fields = readonly_fields
    delete_options = ("recurse", "force")
    change_list_template = "admin/dbstates/state/change_list.html"

    def get_queryset(self, request):
        return selectors.states_list().select_related("parent")

    @admin.display(description="state", ordering="state_id")
    def short_id(self, obj):
        return format_html('<span title="{}">{}</span>', obj.state_id, obj.state_id[:12])

    @admin.display(description="parent")
    def parent_link(self, obj):
        if obj.parent_id is None:
            return "—"
        url = reverse("admin:dbstates_state_change", args=[obj.parent_id])
        return format_html('<a href="{}" title="{}">{}</a>', url, obj.parent_id, obj.parent_id[:12])

    @admin.display(description="size", ordering="size_bytes")
    def size(self, obj):
        return f"{obj.size_bytes / 1024**2:.1f} MiB"

    @admin.display(description="instances", ordering="refcount")
    def refcount(self, obj):
        return obj.refcount

    def delete_service(self, obj, **flags):
        return services.state_delete(state_id=obj.state_id, **flags)

    def get_urls(self):
        return [
            path("tree/", self.admin_site.admin_view(self.tree_view), name="dbstates_state_tree"),
            *super().get_urls(),
        ]

    def tree_view(self, request):
        if not self.has_view_permission(request):
            raise PermissionDenied
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "State tree",
            "rows": _tree_rows(),
            "limit": TREE_LIMIT,
        }
        return TemplateResponse(request, "admin/dbstates/state_tree.html", context)


@snapshot()
def _tree_rows() -> list[dict]:
    """The newest states as (depth, state, its instances) rows, each under its parent."""
    states = list(selectors.states_list().order_by("-created_at")[:TREE_LIMIT])
    by_parent: dict[str | None, list] = {}
    known = {state.state_id for state in states}
    for state in sorted(states, key=lambda s: s.created_at):
        by_parent.setdefault(state.parent_id if state.parent_id in known else None, []).append(state)
    instances: dict[str, list] = {}
    for instance in Instance.objects.filter(state_id__in=known).order_by("created_at"):
        instances.setdefault(instance.state_id, []).append(instance)
    rows, stack = [], [(state, 0) for state in reversed(by_parent.get(None, []))]
    while stack:
        state, depth = stack.pop()
        rows.append(
            {"depth": depth, "indent": depth * 1.5, "state": state, "instances": instances.get(state.state_id, [])}
        )
        stack += [(child, depth + 1) for child in reversed(by_parent.get(state.state_id, []))]
    return rows


@admin.register(Instance)
class InstanceAdmin(OneSnapshotPagesMixin, ServiceDeletionMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["instance_id", "status", "state_link", "dsn", "connections", "names_list", "created_at"]
    list_filter = ["status"]
    search_fields = ["instance_id__startswith", "names__name"]
    search_help_text = "Instance id prefix or name"
    ordering = ["-created_at"]
    list_per_page = 50  # each row asks its server for its connections
    readonly_fields = ["instance_id", "status", "state", "image_id", "job", "dsn", "connections", "port", "pid"]
    readonly_fields += ["runtime_dir", "created_at", "expires_at"]
    fields = readonly_fields
    delete_options = ("force",)

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related("names")

    @admin.display(description="state")
    def state_link(self, obj):
        url = reverse("admin:dbstates_state_change", args=[obj.state_id])
        return format_html('<a href="{}" title="{}">{}</a>', url, obj.state_id, obj.state_id[:12])

    @admin.display(description="live connections")
    def connections(self, obj):
        return deletion_tree.instance_connections(obj)

    @admin.display(description="names")
    def names_list(self, obj):
        return ", ".join(name.name for name in obj.names.all())

    def delete_service(self, obj, **flags):
        return services.instance_delete(instance_id=obj.instance_id, **flags)


@admin.register(Name)
class NameAdmin(admin.ModelAdmin):
    """Names are bound here (a CLI binds them through its own flows); a name points at one instance."""

    list_display = ["name", "instance", "state_id", "image_id", "created_at", "last_used_at"]
    search_fields = ["name"]
    fields = ["name", "instance"]
    autocomplete_fields = ["instance"]

    def get_form(self, request, obj=None, **kwargs):
        form = super().get_form(request, obj, **kwargs)
        form.base_fields["instance"].required = True
        return form

    def save_model(self, request, obj, form, change):
        obj.state_id, obj.image_id = obj.instance.state_id, obj.instance.image_id
        super().save_model(request, obj, form, change)
