"""The engine's config (sqlrs's ``config.json``, here one database row), read and set by JS-style path.

``GET /config`` shows what was set; ``effective`` applies the defaults below. Every change is
validated against ``SCHEMA`` (JSON Schema) and the semantic rules before it is stored.
"""

import copy
import re

import jsonschema
from django.db import transaction

from jobs.dbstates.models import EngineConfig
from pipeline_project.api.errors import InvalidInputError, NotFoundError
from pipeline_project.db.storable import json_problem

DEFAULTS = {
    "orchestrator": {"jobs": {"maxIdentical": 2}},
    "cache": {
        "capacity": {
            "maxBytes": None,  # None: a share of the store's file system (store-coupled)
            "reserveBytes": 1024**3,
            "highWatermark": 0.9,
            "lowWatermark": 0.8,
            "minStateAge": "10m",
        }
    },
}

_nonneg_int = {"type": "integer", "minimum": 0}
_ratio = {"type": "number", "exclusiveMinimum": 0, "maximum": 1}
SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "orchestrator": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "jobs": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"maxIdentical": {"type": "integer", "minimum": 0, "maximum": 10000}},
                }
            },
        },
        "cache": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "capacity": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "maxBytes": {"anyOf": [_nonneg_int, {"type": "null"}]},
                        "reserveBytes": _nonneg_int,
                        "highWatermark": _ratio,
                        "lowWatermark": _ratio,
                        "minStateAge": {"type": "string", "pattern": r"^[0-9]{1,9}(s|m|h|d)$"},
                    },
                }
            },
        },
    },
}
MAX_PATH = 200
PATH_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _parts(path: str) -> list[str]:
    if not isinstance(path, str) or len(path) > MAX_PATH or not PATH_PATTERN.match(path):
        raise InvalidInputError(f"invalid config path {path!r} (expected a.b.c)", code="invalid_argument")
    return path.split(".")


def _merged(base, override):
    if isinstance(base, dict) and isinstance(override, dict):
        return {**base, **{key: _merged(base.get(key), value) for key, value in override.items()}}
    return copy.deepcopy(override)


def _stored() -> dict:
    row = EngineConfig.objects.filter(id=1).first()
    return row.document if row else {}


def config_get(*, path: str | None = None, effective: bool = False):
    document = _merged(DEFAULTS, _stored()) if effective else _stored()
    if path is None:
        return document
    value = document
    for part in _parts(path):
        if not isinstance(value, dict) or part not in value:
            raise NotFoundError(f"config path {path!r} is not set", code="not_found")
        value = value[part]
    return value


def config_value(path: str):
    """One effective value (what the engine's code reads)."""
    return config_get(path=path, effective=True)


def _validate(document: dict) -> None:
    try:
        jsonschema.validate(document, SCHEMA)
    except jsonschema.ValidationError as exc:
        where = ".".join(str(p) for p in exc.absolute_path) or "(root)"
        raise InvalidInputError(f"invalid config value at {where}: {exc.message}", code="invalid_argument") from None
    capacity = _merged(DEFAULTS, document)["cache"]["capacity"]
    if capacity["lowWatermark"] > capacity["highWatermark"]:
        raise InvalidInputError("cache.capacity.lowWatermark must not exceed highWatermark", code="invalid_argument")


def config_set(*, path: str, value) -> dict:
    parts = _parts(path)
    if problem := json_problem(value):
        raise InvalidInputError(f"the value {problem}", code="invalid_argument")
    with transaction.atomic():
        row, _ = EngineConfig.objects.select_for_update().get_or_create(id=1)
        document = copy.deepcopy(row.document)
        node = document
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise InvalidInputError(f"config path {path!r} goes through a value", code="invalid_argument")
        node[parts[-1]] = value
        _validate(document)
        row.document = document
        row.save()
    return {"path": path, "value": value}


def config_remove(*, path: str, effective: bool = False) -> dict:
    parts = _parts(path)
    with transaction.atomic():
        row, _ = EngineConfig.objects.select_for_update().get_or_create(id=1)
        document = copy.deepcopy(row.document)
        node = document
        for part in parts[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict) or parts[-1] not in node:
            raise NotFoundError(f"config path {path!r} is not set", code="not_found")
        del node[parts[-1]]
        row.document = document
        row.save()
    try:
        value = config_get(path=path, effective=effective)
    except NotFoundError:
        value = None
    return {"path": path, "value": value}


def duration_seconds(text: str) -> int:
    return int(text[:-1]) * DURATION_UNITS[text[-1]]
