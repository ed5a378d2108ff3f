"""Raw SQL on Django's connections, for the statements the ORM cannot say in one round trip.

Every app's raw SQL goes through these, with named parameters (``%(name)s`` and a dict)."""

import json
from collections.abc import Mapping

from django.db import connections


def rows(text: str, params: Mapping | None = None, *, using: str = "default") -> list[tuple]:
    """Run a statement that returns rows (asking a cursor for its description costs the hot path)."""
    with connections[using].cursor() as cursor:
        cursor.execute(text, params)
        return cursor.fetchall()


def execute(text: str, params: Mapping | None = None, *, using: str = "default") -> None:
    """Run a statement that returns no rows."""
    with connections[using].cursor() as cursor:
        cursor.execute(text, params)


def json_value(value):
    """jsonb arrives as text through Django's cursor (Django decodes it in JSONField)."""
    return json.loads(value) if isinstance(value, str) else value
