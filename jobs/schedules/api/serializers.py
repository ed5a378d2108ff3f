from rest_framework import serializers

from jobs.schedules import selectors, services
from jobs.schedules.models import MissedPolicy, Schedule
from pipeline_project.api.fields import StrictCharField, StrictIntegerField
from pipeline_project.api.masked_arguments import ArgumentsField
from pipeline_project.api.serializers import RequestSerializer


class ScheduleChangeSerializer(RequestSerializer):
    """Types only: the rules (names, cron, time zone, ranges, the queue's rules for the job) and the
    defaults live in ``jobs.schedules.services``."""

    name = StrictCharField(required=False)
    task = StrictCharField(required=False)
    args = serializers.JSONField(required=False)
    queue = StrictCharField(required=False)
    priority = StrictIntegerField(required=False, help_text="The jobs' priority; lower runs first (default 100).")
    lock_key = StrictCharField(
        required=False, allow_null=True, help_text="The jobs' lock_key; default schedule:<name> (runs never overlap)."
    )
    cron = StrictCharField(
        required=False, allow_null=True, help_text="Five fields: minute hour day-of-month month day-of-week."
    )
    interval_sec = StrictIntegerField(required=False, allow_null=True, help_text="Or every N seconds.")
    timezone = StrictCharField(required=False, help_text="IANA name the cron expression is read in (default UTC).")
    missed_policy = serializers.ChoiceField(choices=MissedPolicy.choices, required=False, help_text="Default skip.")
    catch_up_max = StrictIntegerField(
        required=False, help_text="catch_up: at most this many missed ticks (default 10)."
    )


class ScheduleCreateSerializer(ScheduleChangeSerializer):
    name = StrictCharField()
    task = StrictCharField()


class ScheduleSerializer(serializers.ModelSerializer):
    args = ArgumentsField(read_only=True)  # its jobs' args: masked as theirs are
    next_run_times = serializers.SerializerMethodField(help_text="The next five runs in the schedule's time zone.")

    class Meta:
        model = Schedule
        fields = [
            "id",
            "name",
            "task",
            "args",
            "queue",
            "priority",
            "lock_key",
            "cron",
            "interval_sec",
            "timezone",
            "missed_policy",
            "catch_up_max",
            "paused",
            "next_run_at",
            "next_run_times",
            "last_tick_at",
            "last_job_id",
            "last_skipped",
            "last_skipped_at",
            "declared_in_code",
            "created_at",
            "created_by",
            "changed_at",
            "changed_by",
        ]
        read_only_fields = fields

    def get_next_run_times(self, schedule) -> list[str]:
        zone = services.timing_of(schedule).zone()
        return [moment.astimezone(zone).isoformat() for moment in selectors.next_run_times(schedule)]


class ScheduleChangedSerializer(serializers.Serializer):
    schedule = ScheduleSerializer()
    changed = serializers.BooleanField(help_text="False when the schedule already was in that state.")


class RunNowSerializer(serializers.Serializer):
    job_id = serializers.UUIDField()
    status = serializers.CharField()
