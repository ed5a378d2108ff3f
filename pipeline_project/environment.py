"""Reading settings from the environment: flags, lists, numbers, and secrets (a value, or a file)."""

import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def env_number(name: str, default: float, cast=float):
    value = os.environ.get(name)
    return cast(value) if value not in (None, "") else cast(default)


def env_secret(name: str, default: str = "") -> str:
    """``name``'s value, or the content of the file ``name_FILE`` names (a mounted Secret, a
    compose secret): secrets need not be plain environment variables."""
    path = os.environ.get(f"{name}_FILE")
    if path:
        try:
            return Path(path).read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE={path}: {exc.strerror}") from None
    return os.environ.get(name, default)
