import re

from django.conf import settings
from django.core.validators import RegexValidator
from rest_framework import serializers

from jobs import services
from jobs.models import Job, JobEvent
from pipeline_project.core.fields import INT32_MAX, StrictCharField, StrictIntegerField

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/-]*$")
MAX_BULK = 1000


class NameField(StrictCharField):
    """Queue and task names: letters, digits and ``_ . : / -``."""

    def __init__(self, **kwargs):
        super().__init__(max_length=200, **kwargs)
        self.validators.append(RegexValidator(NAME_PATTERN, "Use letters, digits and _ . : / - only."))


class JobTriggerSerializer(serializers.Serializer):
    queue = NameField()
    task = NameField()
    args = serializers.JSONField(required=False, default=dict)
    idempotency_key = StrictCharField(required=False, allow_null=True, max_length=255, default=None)
    lock_key = StrictCharField(max_length=1000)
    partition_key = StrictCharField(required=False, allow_blank=True, max_length=1000, default="")
    priority = StrictIntegerField(required=False, min_value=0, max_value=INT32_MAX, default=100)
    available_at = serializers.DateTimeField(required=False, allow_null=True, default=None)
    max_attempts = StrictIntegerField(required=False, min_value=0, max_value=1000, default=5)
    lease_ttl_sec = StrictIntegerField(required=False, min_value=1, max_value=7 * 24 * 3600)
    producer = StrictCharField(required=False, allow_null=True, max_length=255, default=None)
    consumer_group = StrictCharField(required=False, allow_null=True, max_length=255, default=None)

    def validate_args(self, value):
        if not isinstance(value, dict):
            raise serializers.ValidationError("Must be a JSON object.")
        return value


def job_spec(data: dict, *, producer: str) -> services.JobSpec:
    """A validated trigger body as a JobSpec; the producer defaults to the caller's name."""
    return services.JobSpec(
        **{
            **data,
            "producer": data["producer"] or producer,
            "lease_ttl_sec": data.get("lease_ttl_sec", settings.DL_DEFAULT_LEASE_TTL_SEC),
        }
    )


class JobBulkTriggerSerializer(serializers.Serializer):
    jobs = JobTriggerSerializer(many=True, allow_empty=False, max_length=MAX_BULK)


class EnqueuedSerializer(serializers.Serializer):
    job_id = serializers.UUIDField()
    status = serializers.CharField()
    created = serializers.BooleanField(help_text="False when idempotency_key returned an existing job.")


class EnqueuedListSerializer(serializers.Serializer):
    jobs = EnqueuedSerializer(many=True)


class JobSerializer(serializers.ModelSerializer):
    class Meta:
        model = Job
        fields = [
            "job_id",
            "status",
            "attempt",
            "started_at",
            "finished_at",
            "heartbeat_at",
            "error",
            "progress",
            "queue",
            "task",
            "args",
            "idempotency_key",
            "lock_key",
            "partition_key",
            "priority",
            "available_at",
            "max_attempts",
            "lease_ttl_sec",
            "lease_expires_at",
            "cancel_requested",
            "producer",
            "consumer_group",
            "created_at",
        ]
        read_only_fields = fields


class JobEventSerializer(serializers.ModelSerializer):
    job_id = serializers.UUIDField()

    class Meta:
        model = JobEvent
        fields = ["event_id", "job_id", "queue", "ts", "kind", "payload"]


class EventsQuerySerializer(serializers.Serializer):
    follow = serializers.BooleanField(default=True, help_text="Keep the stream open until the job is finished.")
    after = serializers.IntegerField(
        min_value=0, max_value=2**63 - 1, default=0, help_text="Resume after this event_id."
    )


class DeleteQuerySerializer(serializers.Serializer):
    dry_run = serializers.BooleanField(default=False)
    force = serializers.BooleanField(default=False, help_text="Delete even a running job.")


class DeletionSerializer(serializers.Serializer):
    job_id = serializers.UUIDField()
    status = serializers.CharField()
    events = serializers.IntegerField()
    deleted = serializers.BooleanField()
    dry_run = serializers.BooleanField()
