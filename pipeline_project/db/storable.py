"""What PostgreSQL can store: JSON for jsonb columns and strings for text columns.

jsonb refuses NaN and the infinities (they are not JSON), the NUL character and lone
surrogates; text columns refuse NUL. Every way in (request bodies, service calls, handler
results) asks these functions, so a value the database would refuse is turned away where
it enters, with a reason, instead of failing a statement that carries other rows too.

What a failure leaves behind (a job's error and traceback, a process's detail, a prepare job's
error) goes through :func:`failure_text`: stored and shown to operators, it is masked as the
logs are, made storable and bounded, whoever failed.
"""

import math
import traceback

from pipeline_project.logging import mask_secrets

MAX_JSON_DEPTH = 64
MAX_ERROR_CHARS = 4000
MAX_TRACEBACK_CHARS = 20000


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


def failure_text(text: str, *, limit: int = MAX_ERROR_CHARS, tail: bool = False) -> str:
    """Text about a failure as it may be stored and shown: secrets masked as the logs mask them,
    what a text column refuses replaced, and at most ``limit`` characters: its start, or with
    ``tail`` its end (where a traceback or a program's output says what went wrong)."""
    text = mask_secrets(storable_text(text))
    return text[-limit:] if tail else text[:limit]


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type's name if it has none): for logs."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def exception_text(exc: BaseException) -> str:
    """``"ValueError: boom"`` as :func:`failure_text` makes it, even for an exception whose
    message cannot be read."""
    try:
        message = str(exc)
    except BaseException:  # noqa: BLE001 - a broken __str__ may raise anything; this text must still be made
        message = f"<{type(exc).__name__} whose message cannot be read>"
    return failure_text(f"{type(exc).__name__}: {message}")


def exception_details(exc: BaseException) -> dict[str, str]:
    """The exception's class and its traceback (its last ``MAX_TRACEBACK_CHARS``), as
    :func:`failure_text` makes them."""
    try:
        formatted = "".join(traceback.format_exception(exc))
    except BaseException:  # noqa: BLE001 - a broken exception may break its formatting; the details must still be made
        formatted = ""
    return {
        "exception_class": f"{type(exc).__module__}.{type(exc).__qualname__}",
        "traceback": failure_text(formatted, limit=MAX_TRACEBACK_CHARS, tail=True),
    }
