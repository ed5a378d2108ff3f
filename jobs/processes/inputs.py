"""Checks of what clients send, shared by the services and the selectors."""

from typing import Any

from jobs.processes.models import MAX_IDEMPOTENCY_KEY_BYTES, MAX_IDEMPOTENCY_KEY_CHARS, MAX_PROCESS_ID_CHARS
from pipeline_project.api.errors import InvalidInputError
from pipeline_project.db.storable import json_problem, text_problem


def check_process_id(process_id: Any) -> None:
    if not isinstance(process_id, str) or not 1 <= len(process_id) <= MAX_PROCESS_ID_CHARS or "\x00" in process_id:
        raise InvalidInputError(f"process_id must be 1 to {MAX_PROCESS_ID_CHARS} characters, without NUL")


def check_json(name: str, value: Any) -> None:
    if problem := json_problem(value):
        raise InvalidInputError(f"{name} cannot be stored: it {problem}")


def check_idempotency_key(key: Any) -> None:
    """None, or text a unique btree index entry can hold (it has room for about 2,700 bytes)."""
    if key is None:
        return
    if (
        not isinstance(key, str)
        or not 1 <= len(key) <= MAX_IDEMPOTENCY_KEY_CHARS
        or text_problem(key)
        or len(key.encode()) > MAX_IDEMPOTENCY_KEY_BYTES
    ):
        raise InvalidInputError(
            f"idempotency_key must be 1 to {MAX_IDEMPOTENCY_KEY_CHARS} characters"
            f" ({MAX_IDEMPOTENCY_KEY_BYTES} bytes of UTF-8), without NUL"
        )
