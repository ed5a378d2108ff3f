"""Django's deploy checks W001–W003 ask for its security, clickjacking and CSRF middleware by
their dotted paths; MIDDLEWARE lists the project's subclasses of them (web.middleware: usable
on the event loop), so those three are silenced in settings and checked here by class."""

from django.conf import settings
from django.core import checks
from django.middleware.clickjacking import XFrameOptionsMiddleware
from django.middleware.csrf import CsrfViewMiddleware
from django.middleware.security import SecurityMiddleware
from django.utils.module_loading import import_string

REQUIRED = {
    "security.W001": SecurityMiddleware,
    "security.W002": XFrameOptionsMiddleware,
    "security.W003": CsrfViewMiddleware,
}


@checks.register(checks.Tags.security, deploy=True)
def security_middleware_installed(app_configs, **kwargs) -> list[checks.CheckMessage]:
    installed = [import_string(path) for path in settings.MIDDLEWARE]
    return [
        checks.Warning(f"No {required.__module__}.{required.__name__} (or subclass) in MIDDLEWARE.", id=check_id)
        for check_id, required in REQUIRED.items()
        if not any(issubclass(middleware, required) for middleware in installed if isinstance(middleware, type))
    ]
