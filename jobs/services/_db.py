"""Running the jobs services' SQL on Django's connection."""

import json

from django.db import connection


def _rows(sql: str, params) -> list[tuple]:
    """Run a statement that returns rows (asking a cursor for its description costs the hot path)."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _execute(sql: str, params) -> None:
    """Run a statement that returns no rows."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def _json(value):
    """jsonb arrives as text through Django's cursor (Django decodes it in JSONField)."""
    return json.loads(value) if isinstance(value, str) else value


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
