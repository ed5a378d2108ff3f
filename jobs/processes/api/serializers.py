from rest_framework import serializers

from jobs.processes.models import MAX_EVENT_ID, MAX_IDEMPOTENCY_KEY_CHARS, MAX_PROCESS_ID_CHARS, PROCESS_STATUSES
from jobs.processes.ranges import DIRECTIONS, INTEGER_LIMITS
from pipeline_project.api.accepts import validated
from pipeline_project.api.fields import QueryIntegerField, StrictBooleanField, StrictCharField, StrictIntegerField
from pipeline_project.api.masked_arguments import ArgumentsField
from pipeline_project.api.serializers import RequestSerializer

# Types only: the rules (storable JSON, a put's consistency, the timer's time) live in the services.


def _limits(name: str) -> dict:
    low, high = INTEGER_LIMITS[name]
    return {"min_value": low, "max_value": high}


class HistoryRangeSerializer(RequestSerializer):
    """Which events the processor gets (progressor's history_range); absent: the namespace's range."""

    offset = StrictIntegerField(
        required=False,
        help_text="Forward: the events after this id; backward: those before it (0: from the last).",
        **_limits("offset"),
    )
    limit = StrictIntegerField(required=False, help_text="At most this many events (absent: all).", **_limits("limit"))
    direction = serializers.ChoiceField(choices=DIRECTIONS, required=False, help_text="Default forward.")


class TaskRequestSerializer(RequestSerializer):
    """init, call and repair: the processor's args, an idempotency key, a context and a history range."""

    args = serializers.JSONField(required=False, allow_null=True, default=None)
    idempotency_key = StrictCharField(
        required=False, allow_null=True, default=None, max_length=MAX_IDEMPOTENCY_KEY_CHARS, trim_whitespace=False
    )
    context = serializers.JSONField(
        required=False, allow_null=True, default=None, help_text="Passed to the processor and the timers it sets."
    )
    range = HistoryRangeSerializer(required=False, allow_null=True, default=None)


class PutEventSerializer(RequestSerializer):
    event_id = StrictIntegerField(min_value=1, max_value=MAX_EVENT_ID)
    timestamp = serializers.JSONField(required=False, help_text="Unix seconds or ISO 8601 with a time zone.")
    payload = serializers.JSONField(required=False, allow_null=True)
    metadata = serializers.JSONField(required=False, allow_null=True)


class PutProcessSerializer(RequestSerializer):
    process_id = StrictCharField(required=False, max_length=MAX_PROCESS_ID_CHARS, trim_whitespace=False)
    status = serializers.ChoiceField(choices=PROCESS_STATUSES, required=False, help_text="Default running.")
    detail = StrictCharField(required=False, allow_null=True, allow_blank=True, trim_whitespace=False)
    aux_state = serializers.JSONField(required=False, allow_null=True)
    metadata = serializers.JSONField(required=False, allow_null=True)
    history = PutEventSerializer(many=True, required=False)


class PutTimerSerializer(RequestSerializer):
    set_timer = serializers.JSONField(help_text="Seconds from now, or an ISO 8601 time with a time zone.")
    remove = StrictBooleanField(required=False, default=False, help_text="The timer removes the process.")

    def validate_set_timer(self, value):
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise serializers.ValidationError("Must be a JSON number or string.")
        return value


class PutActionField(serializers.JSONField):
    """``"remove"`` (the process is removed once imported), or a timer (``PutTimerSerializer``)."""

    default_error_messages = {"invalid": 'Must be "remove" or {{"set_timer": ..., "remove": true?}}.'}

    def to_internal_value(self, data):
        if data == "remove":
            return data
        if not isinstance(data, dict):
            self.fail("invalid")
        return dict(validated(PutTimerSerializer, data))


class PutSerializer(RequestSerializer):
    """An imported process, and optionally its timer: ``{"set_timer": <seconds or ISO time>, "remove": true?}``
    or ``"remove"``."""

    process = PutProcessSerializer()
    action = PutActionField(required=False, allow_null=True, default=None)


class SimpleRepairSerializer(RequestSerializer):
    context = serializers.JSONField(
        required=False, allow_null=True, default=None, help_text="Given to the processor of the timer that runs again."
    )


class RangeQuerySerializer(RequestSerializer):
    offset = QueryIntegerField(required=False, **_limits("offset"))
    limit = QueryIntegerField(required=False, **_limits("limit"))
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
    args = ArgumentsField(allow_null=True)
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
