"""What PostgreSQL can store: JSON for jsonb columns and strings for text columns.

jsonb refuses NaN and the infinities (they are not JSON), the NUL character and lone
surrogates; text columns refuse NUL. Every way in (request bodies, service calls, handler
results) asks these functions, so a value the database would refuse is turned away where
it enters, with a reason, instead of failing a statement that carries other rows too.
"""

import math

MAX_JSON_DEPTH = 64


def text_problem(value: str) -> str | None:
    """Why a string cannot be stored in a text or jsonb column, or None."""
    if "\x00" in value:
        return "contains a NUL (\\u0000) character"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "contains a lone surrogate"
    return None


def json_problem(value, depth: int = 0) -> str | None:
    """Why ``value`` cannot be stored as jsonb, or None."""
    if depth > MAX_JSON_DEPTH:
        return f"is nested deeper than {MAX_JSON_DEPTH} levels"
    if value is None or isinstance(value, (bool, int)):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"contains {value!r}, which JSON cannot represent"
    if isinstance(value, str):
        return text_problem(value)
    if isinstance(value, (list, tuple)):
        return next((problem for item in value if (problem := json_problem(item, depth + 1))), None)
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"has a non-string key {key!r}"
            if problem := text_problem(key) or json_problem(item, depth + 1):
                return problem
        return None
    return f"contains a {type(value).__name__}, which is not JSON"


def storable_text(value: str) -> str:
    """``value`` with what a text column refuses replaced by U+FFFD (for error messages we must keep)."""
    return value.replace("\x00", "\ufffd").encode("utf-8", "replace").decode("utf-8")
