"""The modules that register handlers: which ones a process imports, and which a worker trusts.

Both kinds of handler load the same way: every installed app's module of a given name, then
the modules a setting lists (and any a command line adds). ``@task`` handlers live in
``job_handlers`` modules and ``JOBS_HANDLER_MODULES``; process namespaces in ``processors``
modules and ``PROCESSES_HANDLER_MODULES``.

A job's task name comes from its producer (an API client, say), so a worker imports a module
by name only if it is trusted: inside an installed app, or one of ``JOBS_HANDLER_MODULES``
(or below one). Django ``@task`` functions elsewhere are refused when they are defined and
enqueued (``jobs.tasks_backend``): no worker would run them.
"""

import importlib

from django.apps import apps
from django.conf import settings
from django.utils.module_loading import autodiscover_modules


def load_app_modules(*, app_module: str, setting: str, extra: list[str] = ()) -> None:
    """Every installed app's ``app_module`` module, then the modules of setting ``setting`` and ``extra``."""
    autodiscover_modules(app_module)
    for module in [*getattr(settings, setting), *extra]:
        importlib.import_module(module)


def load_handler_modules(extra: list[str] = ()) -> None:
    """The ``@task`` handlers: every installed app's ``job_handlers`` module, JOBS_HANDLER_MODULES, ``extra``."""
    load_app_modules(app_module="job_handlers", setting="JOBS_HANDLER_MODULES", extra=extra)


def trusted_module(module_path: str) -> bool:
    """Whether a worker may import ``module_path`` to find a task: inside an installed app, or
    one of JOBS_HANDLER_MODULES or below it."""
    if apps.get_containing_app_config(module_path) is not None:
        return True
    return any(
        module_path == trusted or module_path.startswith(f"{trusted}.") for trusted in settings.JOBS_HANDLER_MODULES
    )
