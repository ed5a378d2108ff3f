"""Importing the modules that register task handlers."""

import importlib

from django.conf import settings
from django.utils.module_loading import autodiscover_modules


def load_handler_modules(extra: list[str] = ()) -> None:
    """Every installed app's ``job_handlers`` module, then JOBS_HANDLER_MODULES and ``extra``."""
    autodiscover_modules("job_handlers")
    for module in [*settings.JOBS_HANDLER_MODULES, *extra]:
        importlib.import_module(module)
