"""The modules that register task handlers: which ones a worker imports, and which it trusts.

A job's task name comes from its producer (an API client, say), so a worker imports a module
by name only if it is trusted: inside an installed app, or one of ``JOBS_HANDLER_MODULES``
(or below one). Django ``@task`` functions elsewhere are refused when they are defined and
enqueued (``jobs.tasks_backend``): no worker would run them.
"""

import importlib

from django.apps import apps
from django.conf import settings
from django.utils.module_loading import autodiscover_modules


def load_handler_modules(extra: list[str] = ()) -> None:
    """Every installed app's ``job_handlers`` module, then JOBS_HANDLER_MODULES and ``extra``."""
    autodiscover_modules("job_handlers")
    for module in [*settings.JOBS_HANDLER_MODULES, *extra]:
        importlib.import_module(module)


def trusted_module(module_path: str) -> bool:
    """Whether a worker may import ``module_path`` to find a task: inside an installed app, or
    one of JOBS_HANDLER_MODULES or below it."""
    if apps.get_containing_app_config(module_path) is not None:
        return True
    return any(
        module_path == trusted or module_path.startswith(f"{trusted}.") for trusted in settings.JOBS_HANDLER_MODULES
    )
