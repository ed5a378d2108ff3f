from rest_framework import serializers

from jobs.processes.models import MAX_PROCESS_ID_CHARS
from jobs.processes.selectors import DIRECTIONS
from pipeline_project.core.fields import QueryIntegerField
from pipeline_project.core.serializers import RequestSerializer


class TaskRequestSerializer(RequestSerializer):
    """init, call and repair: the task's args and an optional idempotency key."""

    args = serializers.JSONField(required=False, allow_null=True, default=None)
    idempotency_key = serializers.CharField(required=False, allow_null=True, default=None, max_length=1024)


class PutSerializer(RequestSerializer):
    """An imported process: {status, detail, aux_state, metadata, history: [{event_id, timestamp, payload, metadata}]}."""

    process = serializers.JSONField()
    action = serializers.JSONField(required=False, allow_null=True, default=None)


class SimpleRepairSerializer(RequestSerializer):
    context = serializers.JSONField(required=False, allow_null=True, default=None)


class RangeQuerySerializer(RequestSerializer):
    offset = QueryIntegerField(required=False, min_value=0)
    limit = QueryIntegerField(required=False, min_value=0, max_value=10_000)
    direction = serializers.ChoiceField(choices=DIRECTIONS, required=False)


class ResponseSerializer(serializers.Serializer):
    response = serializers.JSONField(allow_null=True)


class EventSerializer(serializers.Serializer):
    event_id = serializers.IntegerField()
    task_id = serializers.IntegerField()
    timestamp = serializers.DateTimeField()
    metadata = serializers.JSONField(allow_null=True)
    payload = serializers.JSONField(allow_null=True)


class ProcessSerializer(serializers.Serializer):
    namespace = serializers.CharField()
    process_id = serializers.CharField(max_length=MAX_PROCESS_ID_CHARS)
    status = serializers.CharField()
    previous_status = serializers.CharField(allow_null=True)
    status_changed_at = serializers.DateTimeField()
    detail = serializers.CharField(allow_null=True)
    aux_state = serializers.JSONField(allow_null=True)
    metadata = serializers.JSONField(allow_null=True)
    corrupted_by = serializers.IntegerField(allow_null=True)
    history = EventSerializer(many=True)
    last_event_id = serializers.IntegerField()
    range = serializers.DictField()


class TraceTaskSerializer(serializers.Serializer):
    task_id = serializers.IntegerField()
    task_type = serializers.CharField()
    status = serializers.CharField()
    scheduled_time = serializers.DateTimeField()
    running_time = serializers.DateTimeField(allow_null=True)
    finished_time = serializers.DateTimeField(allow_null=True)
    args = serializers.JSONField(allow_null=True)
    metadata = serializers.JSONField(allow_null=True)
    idempotency_key = serializers.CharField(allow_null=True)
    response = serializers.JSONField(allow_null=True)
    retry_interval = serializers.FloatField()
    retry_attempts = serializers.IntegerField()
    events = EventSerializer(many=True)


class TraceSerializer(serializers.Serializer):
    tasks = TraceTaskSerializer(many=True)


class NamespaceHealthSerializer(serializers.Serializer):
    namespace = serializers.CharField()
    status = serializers.CharField()
    processes = serializers.DictField(child=serializers.IntegerField())
    running_tasks = serializers.IntegerField()
    timers_due_next_hour = serializers.IntegerField()
