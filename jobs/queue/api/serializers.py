from rest_framework import serializers

from jobs.queue import services
from jobs.queue.models import Job
from pipeline_project.api.fields import QueryIntegerField, StrictBooleanField, StrictCharField, StrictIntegerField
from pipeline_project.api.masked_arguments import ArgumentsField
from pipeline_project.api.serializers import PageQuery, RequestSerializer

MAX_BULK = 1000


def _limits(name: str) -> dict:
    low, high = services.INTEGER_LIMITS[name]
    return {"min_value": low, "max_value": high}


class JobTriggerSerializer(RequestSerializer):
    """Types only: the queue's rules (names, byte lengths, ranges, storable args) and defaults
    live in ``services`` and are applied by ``validate``."""

    queue = StrictCharField()
    task = StrictCharField()
    args = serializers.JSONField(required=False)
    idempotency_key = StrictCharField(required=False, allow_null=True)
    lock_key = StrictCharField(help_text="Required: jobs with one lock_key never run at the same time.")
    partition_key = StrictCharField(required=False, allow_blank=True)
    priority = StrictIntegerField(required=False, help_text="Lower runs first (default 100).", **_limits("priority"))
    available_at = serializers.DateTimeField(required=False, allow_null=True)
    max_attempts = StrictIntegerField(required=False, help_text="Default 5.", **_limits("max_attempts"))
    lease_ttl_sec = StrictIntegerField(
        required=False, help_text="Default DL_DEFAULT_LEASE_TTL_SEC.", **_limits("lease_ttl_sec")
    )
    producer = StrictCharField(required=False, allow_null=True, help_text="Default: the caller's token name.")
    consumer_group = StrictCharField(required=False, allow_null=True)
    depends_on = serializers.ListField(
        child=serializers.UUIDField(),
        required=False,
        help_text=f"Job ids this job waits for: it runs once all succeeded (at most {services.MAX_DEPENDS_ON}).",
    )
    run_anyway = StrictBooleanField(
        required=False, help_text="Run once every depends_on job finished, even if one failed or was canceled."
    )

    def validate(self, attrs):
        if problems := services.job_spec_problems(services.JobSpec(**attrs)):
            raise serializers.ValidationError(problems)
        return attrs


def job_spec(data: dict, *, producer: str) -> services.JobSpec:
    """A validated trigger body as a JobSpec; the producer defaults to the caller's name."""
    return services.JobSpec(**{**data, "producer": data.get("producer") or producer})


class JobBulkTriggerSerializer(RequestSerializer):
    jobs = JobTriggerSerializer(many=True, allow_empty=False, max_length=MAX_BULK)


class EnqueuedSerializer(serializers.Serializer):
    job_id = serializers.UUIDField()
    status = serializers.CharField()
    created = serializers.BooleanField(help_text="False when idempotency_key returned an existing job.")


class EnqueuedListSerializer(serializers.Serializer):
    jobs = EnqueuedSerializer(many=True)


class JobSerializer(serializers.ModelSerializer):
    args = ArgumentsField(read_only=True)
    waiting = serializers.BooleanField(
        source="is_waiting", help_text="Queued, but waiting for the jobs it depends on (see depends_on)."
    )

    class Meta:
        model = Job
        fields = [
            "job_id",
            "status",
            "waiting",
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


class LinkedJobSerializer(serializers.Serializer):
    job_id = serializers.UUIDField()
    task = serializers.CharField()
    status = serializers.CharField(help_text="The job's status, or waiting.")
    run_anyway = serializers.BooleanField()


class JobDetailSerializer(JobSerializer):
    """One job, with the jobs it waits for and the jobs waiting for it."""

    depends_on = LinkedJobSerializer(many=True, source="upstream", help_text="The jobs it waits for.")
    needed_by = LinkedJobSerializer(many=True, source="downstream", help_text="The jobs waiting for it.")

    class Meta(JobSerializer.Meta):
        fields = [*JobSerializer.Meta.fields, "depends_on", "needed_by"]
        read_only_fields = fields


class EventsQuerySerializer(RequestSerializer):
    follow = serializers.BooleanField(default=True, help_text="Keep the stream open until the job is finished.")
    after = QueryIntegerField(
        min_value=0, max_value=2**63 - 1, default=0, help_text="Resume after this event_id (or send Last-Event-ID)."
    )

    def to_internal_value(self, data):
        # An EventSource resumes with a Last-Event-ID header: ``after``, when the query has none.
        headers = self.context["request"].headers
        if "after" not in data and "Last-Event-ID" in headers:
            data = {**data.dict(), "after": headers["Last-Event-ID"]}
        return super().to_internal_value(data)


class DeleteQuerySerializer(RequestSerializer):
    dry_run = serializers.BooleanField(default=False)
    force = serializers.BooleanField(default=False, help_text="Delete even a running job.")


def _filter() -> serializers.CharField:
    return serializers.CharField(required=False, allow_blank=True)  # empty: no filter, as JobFilter reads it


class JobListQuery(PageQuery):
    """The list's query string: the paginator's parameters, and ``JobFilter``'s (it validates their
    values; here they are only named, so that no other is taken)."""

    queue = _filter()
    task = _filter()
    status = serializers.ListField(child=_filter(), required=False)
    lock_key = _filter()
    partition_key = _filter()
    idempotency_key = _filter()
    args = _filter()
    error = _filter()
    created_after = _filter()
    created_before = _filter()


class DeletionSerializer(serializers.Serializer):
    job_id = serializers.UUIDField()
    status = serializers.CharField()
    events = serializers.IntegerField()
    deleted = serializers.BooleanField()
    dry_run = serializers.BooleanField()


class BulkActionSerializer(RequestSerializer):
    filters = serializers.DictField(
        help_text="The list's filters (queue, task, status, lock_key, args, error, created_after, ...); "
        "at least one, or `all: true`."
    )
    all = StrictBooleanField(default=False, help_text="Act on every job (when filters are empty).")
    dry_run = StrictBooleanField(default=False, help_text="Count what would change; change nothing.")
    force = StrictBooleanField(default=False, help_text="delete: running jobs too.")

    def validate(self, attrs):
        if not attrs["filters"] and not attrs["all"]:
            raise serializers.ValidationError({"filters": ["Name at least one filter, or set all: true."]})
        return attrs


class CountsSerializer(serializers.Serializer):
    matched = serializers.IntegerField(help_text="Jobs the filters match.")
    changed = serializers.IntegerField(help_text="Jobs retried, canceled (queued) or deleted.")
    requested = serializers.IntegerField(help_text="cancel: running jobs asked to stop.")
    skipped = serializers.IntegerField(help_text="Matched jobs the action does not apply to.")
    dry_run = serializers.BooleanField()


class QueueSerializer(serializers.Serializer):
    name = serializers.CharField()
    paused = serializers.BooleanField()
    changed_at = serializers.DateTimeField(allow_null=True)
    changed_by = serializers.CharField()
    depth = serializers.DictField(child=serializers.IntegerField(), help_text="Jobs by status.")
    max_running = serializers.IntegerField(allow_null=True)
    rate_limit = serializers.IntegerField(allow_null=True)
    rate_period_sec = serializers.IntegerField(allow_null=True)
    per_partition = serializers.BooleanField()
    started_in_period = serializers.IntegerField(
        allow_null=True, help_text="Jobs started in the last rate_period_sec (null: no rate limit)."
    )


CREATE_HELP = "Make the queue if no job, worker, schedule or setting names it yet (otherwise: 404)."


class QueuePauseSerializer(RequestSerializer):
    create = StrictBooleanField(required=False, help_text=CREATE_HELP)


class QueueLimitsSerializer(RequestSerializer):
    """Types only: the ranges and rules are ``services.queue_limits_set``'s. The body replaces the
    queue's limits: an absent or null limit is no limit."""

    max_running = StrictIntegerField(required=False, allow_null=True, help_text="At most this many running at once.")
    rate_limit = StrictIntegerField(
        required=False, allow_null=True, help_text="At most this many started per rate_period_sec (set both)."
    )
    rate_period_sec = StrictIntegerField(required=False, allow_null=True, help_text="The rate's period in seconds.")
    per_partition = StrictBooleanField(required=False, help_text="The limits hold per partition_key.")
    create = StrictBooleanField(required=False, help_text=CREATE_HELP)


class QueueLimitsOutSerializer(serializers.Serializer):
    queue = serializers.CharField()
    max_running = serializers.IntegerField(allow_null=True)
    rate_limit = serializers.IntegerField(allow_null=True)
    rate_period_sec = serializers.IntegerField(allow_null=True)
    per_partition = serializers.BooleanField()


class QueueChangeSerializer(serializers.Serializer):
    queue = serializers.CharField()
    paused = serializers.BooleanField()
    changed = serializers.BooleanField(help_text="False when the queue already was in that state.")
