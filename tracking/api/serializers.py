from rest_framework import serializers

from pipeline_project.api.fields import (
    INT32_MAX,
    QueryIntegerField,
    StrictCharField,
    StrictIntegerField,
    contains_control_characters,
)
from pipeline_project.api.serializers import RequestSerializer
from tracking.models import Status

MAX_SHARDS_PER_REGISTER = 10_000
QUEUE_LIMIT_DEFAULT = 100
QUEUE_LIMIT_MAX = 1000


class FilenameField(StrictCharField):
    """The event file's name prefix: a plain name, never a path."""

    def __init__(self, **kwargs):
        super().__init__(max_length=255, trim_whitespace=False, **kwargs)

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if "/" in value or "\\" in value:
            raise serializers.ValidationError("Must not contain path separators.")
        if value in {".", ".."}:
            raise serializers.ValidationError("Must be a file name, not a directory reference.")
        if contains_control_characters(value):
            raise serializers.ValidationError("Must not contain control characters.")
        return value


def validate_filename(value: str) -> str:
    """Validate a filename taken from the URL path with the same rules as request bodies."""
    field = FilenameField()
    try:
        return field.run_validation(value)
    except serializers.ValidationError as exc:
        raise serializers.ValidationError({"filename": exc.detail}) from None


class ShardField(StrictIntegerField):
    def __init__(self, **kwargs):
        super().__init__(min_value=0, max_value=INT32_MAX, **kwargs)


class FileRegisterSerializer(RequestSerializer):
    filename = FilenameField()
    shards = serializers.ListField(child=ShardField(), allow_empty=False, max_length=MAX_SHARDS_PER_REGISTER)


class FileRegisterResponseSerializer(serializers.Serializer):
    filename = serializers.CharField()
    shards = serializers.ListField(child=serializers.IntegerField())
    created = serializers.BooleanField(help_text="Whether any row was created by this call.")


class FileSerializer(RequestSerializer):
    filename = FilenameField()


class EventIngestDoneResponseSerializer(serializers.Serializer):
    filename = serializers.CharField()
    updated_rows = serializers.IntegerField(help_text="Rows that changed (0 on a repeat).")


class ShardRowSerializer(RequestSerializer):
    filename = FilenameField()
    shard = ShardField()


class TransitionResponseSerializer(serializers.Serializer):
    filename = serializers.CharField()
    shard = serializers.IntegerField()
    stage = serializers.CharField()
    status = serializers.ChoiceField(choices=Status.choices)


class QueueQuerySerializer(RequestSerializer):
    limit = QueryIntegerField(min_value=1, max_value=QUEUE_LIMIT_MAX, default=QUEUE_LIMIT_DEFAULT)
    offset = QueryIntegerField(min_value=0, max_value=10**9, default=0)
    updated_since = serializers.DateTimeField(required=False, help_text="Only rows updated at or after this time.")


class QueueClaimSerializer(RequestSerializer):
    limit = StrictIntegerField(min_value=1, max_value=QUEUE_LIMIT_MAX, default=1)


class QueueItemSerializer(serializers.Serializer):
    filename = serializers.CharField()
    shard = serializers.IntegerField()
    created_at = serializers.DateTimeField()


class QueueResponseSerializer(serializers.Serializer):
    stage = serializers.CharField()
    items = QueueItemSerializer(many=True)


class ShardStatusSerializer(serializers.Serializer):
    shard = serializers.IntegerField()
    event_ingest_status = serializers.CharField()
    shard_splitter_status = serializers.CharField()
    shard_worker_status = serializers.CharField()
    mysql_sender_status = serializers.CharField()
    updated_at = serializers.DateTimeField()


class FileStatusResponseSerializer(serializers.Serializer):
    filename = serializers.CharField()
    shards = ShardStatusSerializer(many=True)


class StageCountsSerializer(serializers.Serializer):
    new = serializers.IntegerField()
    started = serializers.IntegerField()
    done = serializers.IntegerField()
    failed = serializers.IntegerField()


class ShardSummarySerializer(serializers.Serializer):
    shard = serializers.IntegerField()
    total = serializers.IntegerField()
    done = serializers.IntegerField(help_text="Rows done through mysql-sender.")
    failed = serializers.IntegerField(help_text="Rows failed at any stage.")


class MetricsSummarySerializer(serializers.Serializer):
    total = serializers.IntegerField()
    by_stage = serializers.DictField(child=StageCountsSerializer())
    by_shard = ShardSummarySerializer(many=True)
