"""The shapes of the sqlrs API's requests, bodies and query strings: which fields, their JSON
types and their sizes. A field not declared, a missing required one, a wrong type or an
oversized value is a 400 before any service runs. What a value may be (a kind, a path, a flag,
a filter) is checked by the service or selector it goes to.
"""

from rest_framework import serializers

from jobs.dbstates import config, selectors, services
from jobs.dbstates.engine import prepare_args, runs
from jobs.dbstates.engine.steps import PrepareRequest
from pipeline_project.api.fields import StrictBooleanField, StrictCharField
from pipeline_project.api.serializers import RequestSerializer

MAX_NAME = 64  # kinds, modes
MAX_PATH = 4096  # file system paths


def _text(**kwargs) -> StrictCharField:
    """A program's argument or input as sent: not trimmed, may be empty."""
    return StrictCharField(trim_whitespace=False, allow_blank=True, **kwargs)


def _arguments(**kwargs) -> serializers.ListField:
    return serializers.ListField(
        child=_text(max_length=prepare_args.MAX_ARG_BYTES), max_length=prepare_args.MAX_ARGS, **kwargs
    )


def _optional(field_class, **kwargs):
    """A field that may be left out or sent as null (None either way: not given)."""
    return field_class(required=False, allow_null=True, **kwargs)


class PrepareRequestSerializer(RequestSerializer):
    """sqlrs's CacheExplainPrepareRequest (and PrepareJobRequest without plan_only); sqlrs's CLI
    sends ``psql_args: null`` with an lb request."""

    prepare_kind = StrictCharField(max_length=MAX_NAME)
    image_id = StrictCharField(max_length=services.MAX_IMAGE_ID)
    psql_args = _arguments(required=False, allow_null=True)
    stdin = _optional(_text)
    liquibase_args = _arguments(required=False, allow_null=True)
    liquibase_exec = _optional(StrictCharField, allow_blank=True, max_length=MAX_PATH)
    liquibase_exec_mode = _optional(StrictCharField, allow_blank=True, max_length=MAX_NAME)
    liquibase_env = _optional(serializers.DictField, child=_text(max_length=prepare_args.MAX_ARG_BYTES))
    work_dir = _optional(StrictCharField, max_length=MAX_PATH)
    source_manifest = _optional(serializers.JSONField)  # declared so that its refusal says why


class PrepareJobSerializer(PrepareRequestSerializer):
    """sqlrs's PrepareJobRequest."""

    plan_only = _optional(StrictBooleanField)


def prepare_request(body: dict) -> PrepareRequest:
    """A validated prepare (or explain) body as the services take it."""
    return PrepareRequest.of_fields(body)


class RunStepSerializer(RequestSerializer):
    args = _arguments()
    stdin = _optional(_text)


def run_steps(body: dict) -> list[runs.RunCommand] | None:
    """A validated run body's steps as the service takes them (None: not given)."""
    steps = body.get("steps")
    return None if steps is None else [runs.RunCommand(step["args"], step.get("stdin")) for step in steps]


class RunRequestSerializer(RequestSerializer):
    """sqlrs's RunRequest (``args`` may be left out when ``steps`` are given)."""

    instance_ref = StrictCharField(max_length=selectors.MAX_FILTER)
    kind = StrictCharField(max_length=MAX_NAME)
    command = _optional(StrictCharField, max_length=MAX_NAME)
    args = _arguments(required=False, allow_null=True)
    stdin = _optional(_text)
    steps = RunStepSerializer(many=True, required=False, allow_null=True, max_length=runs.MAX_STEPS)


class ConfigSetSerializer(RequestSerializer):
    """sqlrs's ConfigSetRequest: ``value`` is any JSON value, null included."""

    path = StrictCharField(max_length=config.MAX_PATH)
    value = serializers.JSONField(allow_null=True)


# Query strings


def _flag() -> serializers.BooleanField:
    """A flag as sqlrs reads one (Go's ParseBool: 1, t, T, true, True, TRUE and their false), or yes/no,
    on/off; left out or empty, false (as an empty filter is no filter, as there)."""
    return serializers.BooleanField(required=False, default=False)


def _filter(*, max_length: int = selectors.MAX_FILTER, required: bool = False) -> StrictCharField:
    return StrictCharField(max_length=max_length, required=required)


class QuerySerializer(RequestSerializer):
    """A query string: only the parameters declared, each given once."""

    def to_internal_value(self, data):
        if hasattr(data, "getlist"):
            repeated = sorted(name for name in data if len(data.getlist(name)) > 1)
            if repeated:
                raise serializers.ValidationError({name: ["Given more than once."] for name in repeated})
        return super().to_internal_value(data)


class JobsQuery(QuerySerializer):
    job = _filter()  # prepare jobs whose id starts with it


class TasksQuery(QuerySerializer):
    job = _filter()  # the tasks of this prepare job


class InstancesQuery(QuerySerializer):
    id_prefix = _filter()
    state = _filter()
    image = _filter()


class NamesQuery(QuerySerializer):
    instance = _filter()
    state = _filter()
    image = _filter()


class StatesQuery(QuerySerializer):
    id_prefix = _filter()
    kind = _filter()
    image = _filter()


class ConfigQuery(QuerySerializer):
    path = _filter(max_length=config.MAX_PATH)
    effective = _flag()


class ConfigRemoveQuery(ConfigQuery):
    path = _filter(max_length=config.MAX_PATH, required=True)


class DeleteQuery(QuerySerializer):
    force = _flag()  # despite active connections (terminated), or a running job (canceled)
    dry_run = _flag()  # answer the tree, delete nothing


class StateDeleteQuery(DeleteQuery):
    recurse = _flag()  # its descendant states and their instances too
