"""Schedules in the admin: list them with their next and last runs, add and edit them (through the
services, which hold the rules), pause, resume and run them now. Schedules declared in code are
read-only here but for those three actions and delete."""

from django import forms
from django.contrib import admin, messages
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from jobs.schedules import selectors, services
from jobs.schedules.models import Schedule
from pipeline_project.api.errors import ApplicationError
from pipeline_project.audit.actions import may
from pipeline_project.audit.services import audited_call
from pipeline_project.web.arguments import arguments_masked, arguments_masked_text, may_view_arguments
from pipeline_project.web.times import ago, duration


class ScheduleForm(forms.ModelForm):
    class Meta:
        model = Schedule
        fields = list(services.FIELDS)
        # One-line values (text columns get a textarea by default).
        widgets = {
            name: forms.TextInput(attrs={"size": 60})
            for name in ("name", "task", "queue", "lock_key", "cron", "timezone")
        }

    def clean(self):
        cleaned = super().clean()
        for name in ("cron", "lock_key"):  # an empty box: none (the interval; the default lock key)
            if name in cleaned:
                cleaned[name] = cleaned[name] or None
        current = {name: getattr(self.instance, name) for name in services.FIELDS} if self.instance.pk else {}
        values = {**services.DEFAULTS, **current, **cleaned}
        if all(name in values for name in services.FIELDS):
            for name, problems in services.schedule_problems(values).items():
                self.add_error(name if name in self.fields else None, problems)
        return cleaned


def _when(moment, zone) -> str:
    """The time in the schedule's zone, and how far from now ("in 2 h 5 min", "3 min ago": overdue)."""
    ahead = moment - timezone.now()
    relative = f"in {duration(ahead)}" if ahead.total_seconds() > 0 else ago(moment)
    return f"{moment.astimezone(zone):%Y-%m-%d %H:%M:%S %Z} ({relative})"


@admin.register(Schedule)
class ScheduleAdmin(admin.ModelAdmin):
    form = ScheduleForm
    list_display = ["name", "timing", "task", "next_run", "last_run", "paused", "missed_policy", "in_code"]
    list_filter = ["paused", "declared_in_code", "missed_policy", "queue"]
    search_fields = ["name", "task"]
    ordering = ["name"]
    actions = ["pause_schedules", "resume_schedules", "run_schedules_now"]
    readonly_fields = [
        "paused",
        "next_runs",
        "last_run",
        "missed",
        "declared_in_code",
        "created_at",
        "created_by",
        "changed_at",
        "changed_by",
    ]
    fieldsets = [
        (None, {"fields": ["name", "task", "args", "queue", "priority", "lock_key"]}),
        ("When", {"fields": ["cron", "interval_sec", "timezone", "paused", "next_runs", "last_run"]}),
        (
            "Missed ticks",
            {
                "fields": ["missed_policy", "catch_up_max", "missed"],
                "description": "A tick more than DL_SCHEDULES_GRACE_SEC late when a worker gets to it (no worker "
                "ran) is missed: skip runs none of them, once the latest, catch_up the latest N, oldest first. "
                "Ticks less late always run.",
            },
        ),
        (None, {"fields": ["declared_in_code", "created_at", "created_by", "changed_at", "changed_by"]}),
    ]

    def get_readonly_fields(self, request, obj=None):
        hidden = ["masked_args"] if self._args_hidden(request, obj) else []
        if obj is not None and obj.declared_in_code:
            return [*services.FIELDS, *self.readonly_fields, *hidden]
        return [*self.readonly_fields, *hidden]

    def _args_hidden(self, request, obj) -> bool:
        """Whether the schedule's args hold secrets the user may not view: then they are shown
        masked and read-only (a form cannot give back values it never showed)."""
        return obj is not None and not may_view_arguments(request) and arguments_masked(obj.args) != obj.args

    def get_fieldsets(self, request, obj=None):
        fieldsets = super().get_fieldsets(request, obj)
        if not self._args_hidden(request, obj):
            return fieldsets
        return [
            (title, {**options, "fields": ["masked_args" if name == "args" else name for name in options["fields"]]})
            for title, options in fieldsets
        ]

    @admin.display(description="args")
    def masked_args(self, obj):
        return arguments_masked_text(obj.args)

    def get_changeform_initial_data(self, request):
        return {
            **{name: value for name, value in services.DEFAULTS.items() if value is not None},
            **super().get_changeform_initial_data(request),
        }

    @admin.display(description="when")
    def timing(self, obj):
        return f"{obj.cron} ({obj.timezone})" if obj.cron else f"every {obj.interval_sec} s"

    @admin.display(boolean=True, description="in code", ordering="declared_in_code")
    def in_code(self, obj):
        return obj.declared_in_code

    @admin.display(description="next run", ordering="next_run_at")
    def next_run(self, obj):
        return "paused" if obj.paused else _when(obj.next_run_at, services.timing_of(obj).zone())

    @admin.display(description="next five runs")
    def next_runs(self, obj):
        if obj is None or obj.pk is None:
            return "–"
        times = selectors.next_run_times(obj)
        if not times:
            return "none while paused"
        zone = services.timing_of(obj).zone()
        return format_html_join("", '<div class="next-run">{}</div>', ((_when(moment, zone),) for moment in times))

    @admin.display(description="last run")
    def last_run(self, obj):
        if obj is None or obj.last_job_id is None:
            return "–"
        tick = f" (tick {obj.last_tick_at:%Y-%m-%d %H:%M:%S} UTC)" if obj.last_tick_at else ""
        link = reverse("admin:jobs_job_change", args=[obj.last_job_id])
        return format_html('<a class="last-job" href="{}">job …{}</a>{}', link, str(obj.last_job_id)[-8:], tick)

    @admin.display(description="last missed ticks")
    def missed(self, obj):
        if obj is None or not obj.last_skipped_at:
            return "none skipped"
        return f"{obj.last_skipped} skipped at {obj.last_skipped_at:%Y-%m-%d %H:%M:%S} UTC"

    def save_model(self, request, obj, form, change):
        by = request.user.get_username()
        if change:
            changes = {name: form.cleaned_data[name] for name in form.changed_data if name in services.FIELDS}
            saved = services.schedule_update(schedule_id=obj.pk, changes=changes, by=by) if changes else obj
        else:
            values = {name: form.cleaned_data[name] for name in services.FIELDS if name in form.cleaned_data}
            saved = services.schedule_create(values=values, by=by)
        obj.__dict__.update({field.attname: getattr(saved, field.attname) for field in Schedule._meta.concrete_fields})
        obj._state.adding = False

    def delete_model(self, request, obj):
        services.schedule_delete(schedule_id=obj.pk)

    def delete_queryset(self, request, queryset):
        for schedule_id in queryset.values_list("pk", flat=True):
            services.schedule_delete(schedule_id=schedule_id)

    def has_pause_permission(self, request):
        return may(request.user, "schedule.pause")

    def has_run_permission(self, request):
        return may(request.user, "schedule.run_now")

    @admin.action(description="Pause selected schedules", permissions=["pause"])
    def pause_schedules(self, request, queryset):
        self._each(
            request, queryset, "schedule.pause", lambda pk, by: services.schedule_pause(schedule_id=pk, by=by)[1]
        )

    @admin.action(description="Resume selected schedules (from their next tick)", permissions=["pause"])
    def resume_schedules(self, request, queryset):
        self._each(
            request, queryset, "schedule.resume", lambda pk, by: services.schedule_resume(schedule_id=pk, by=by)[1]
        )

    @admin.action(description="Run selected schedules now (one job each)", permissions=["run"])
    def run_schedules_now(self, request, queryset):
        self._each(
            request, queryset, "schedule.run_now", lambda pk, by: bool(services.schedule_run_now(schedule_id=pk, by=by))
        )

    def _each(self, request, queryset, action: str, act) -> None:
        selected = list(queryset.values_list("pk", "name"))

        def each() -> list:
            changed = []
            for schedule_id, name in selected:
                try:
                    if act(schedule_id, request.user.get_username()):
                        changed.append(schedule_id)
                except ApplicationError as error:
                    self.message_user(request, f"{name}: {error.message}", messages.WARNING)
            return changed

        changed = audited_call(each, request=request, action=action, count=len, objects_of=list)
        done = {"schedule.pause": "paused", "schedule.resume": "resumed", "schedule.run_now": "enqueued"}[action]
        self.message_user(request, f"{len(changed)} of {len(selected)} schedule(s) {done}.")
