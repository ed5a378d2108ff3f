"""Structured logging: JSON lines carrying the request id, with secrets masked."""

import contextvars
import logging
import re

from pythonjsonlogger.json import JsonFormatter as _JsonFormatter

request_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)

MASK = "***"
# Bearer tokens, DSN passwords (scheme://user:password@host) and key=value secrets.
_SECRET_PATTERNS = [
    (re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]+"), rf"\g<1>{MASK}"),
    (re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://[^:/@\s]*:)[^@\s]+(@)"), rf"\g<1>{MASK}\g<2>"),
    (
        re.compile(r"(?i)\b(password|passwd|secret|token|api_key|apikey)(['\"]?\s*[=:]\s*)(['\"]?)[^\s'\",&}]+"),
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
    """Mask secrets in the message, its arguments and string extras."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = mask_secrets(record.getMessage())
        record.args = None
        for key, value in list(record.__dict__.items()):
            if key not in _STANDARD_ATTRS and isinstance(value, str):
                setattr(record, key, mask_secrets(value))
        if record.exc_info and not record.exc_text:
            record.exc_text = mask_secrets(logging.Formatter().formatException(record.exc_info))
        return True


_STANDARD_ATTRS = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


class JsonFormatter(_JsonFormatter):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("timestamp", "ts")
        kwargs.setdefault("rename_fields", {"levelname": "level", "name": "logger"})
        super().__init__("%(levelname)s %(name)s %(message)s %(request_id)s", *args, **kwargs)

    def formatException(self, ei) -> str:
        return mask_secrets(super().formatException(ei))
