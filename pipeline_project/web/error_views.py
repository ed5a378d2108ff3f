"""Django's error views (the URLconf's handler400/403/404/500 and ``settings.CSRF_FAILURE_VIEW``):
JSON in the path's error shape on the API's paths (``settings.JSON_ERROR_PATHS``), Django's
pages elsewhere."""

from django.urls import Resolver404
from django.views import csrf, defaults

from pipeline_project.api.errors import error_shape, json_error


def not_found(request, exception=None):
    if error_shape(request.path):
        message = f"No endpoint at {request.path}." if isinstance(exception, Resolver404) else "Not found."
        return json_error(request.path, 404, "not_found", message)
    return defaults.page_not_found(request, exception)


def bad_request(
    request,
    exception=None,
    *,
    code: str = "bad_request",
    message: str = "The request could not be understood.",
    details: dict | None = None,
):
    if error_shape(request.path):
        return json_error(request.path, 400, code, message, details)
    return defaults.bad_request(request, exception)


def permission_denied(request, exception=None):
    if error_shape(request.path):
        return json_error(request.path, 403, "permission_denied", "You do not have permission to perform this action.")
    return defaults.permission_denied(request, exception)


def csrf_failure(request, reason=""):
    if error_shape(request.path):
        return json_error(request.path, 403, "csrf_failed", f"CSRF check failed: {reason}")
    return csrf.csrf_failure(request, reason)


def server_error(request):
    if error_shape(request.path):
        return json_error(request.path, 500, "server_error", "Internal server error; the request id is in the logs.")
    return defaults.server_error(request)
