"""sqlrs routes answer errors as sqlrs's ErrorResponse: ``{code, message[, details]}``, details
as text. The project's error handler builds the body; this one only reshapes it."""

import json

from django.views.decorators.csrf import csrf_exempt
from rest_framework.settings import api_settings

from jobs.dbstates import services
from pipeline_project.api.errors import api_exception_handler
from pipeline_project.api.rendering import JSONAnswer

# sqlrs's codes for DRF's own errors.
CODES = {
    "not_authenticated": "unauthorized",
    "authentication_failed": "unauthorized",
    "permission_denied": "forbidden",
    "parse_error": "invalid_argument",
    "validation_error": "invalid_argument",
    "invalid": "invalid_argument",
    "unsupported_media_type": "invalid_argument",
}


def sqlrs_error(code: str, message: str, details=None) -> dict:
    """The body of every sqlrs error (``settings.JSON_ERROR_PATHS`` names it for /sqlrs/)."""
    text = details if isinstance(details, str) or not details else json.dumps(details, sort_keys=True)
    return services.error_of(CODES.get(code, code), message, text or "")


def sqlrs_error_response(status: int, code: str, message: str, *, headers: dict | None = None) -> JSONAnswer:
    """A sqlrs error answered outside a view's exception handler (no route; a stream's range)."""
    return JSONAnswer(sqlrs_error(code, message), status=status, headers=headers)


def _problems(details, where: str = ""):
    """``field.sub: message`` for every message of a serializer's errors, in order."""
    if isinstance(details, dict):
        for name, inner in details.items():
            yield from _problems(inner, where if name == api_settings.NON_FIELD_ERRORS_KEY else _below(where, name))
    elif isinstance(details, list):
        for index, inner in enumerate(details):
            yield from _problems(inner, where if isinstance(inner, str) else _below(where, index))
    elif details:
        yield f"{where}: {details}" if where else str(details)


def _below(where: str, name) -> str:
    return f"{where}.{name}" if where else str(name)


def sqlrs_exception_handler(exc, context):
    response = api_exception_handler(exc, context)
    if response is not None and isinstance(response.data, dict) and "code" in response.data:
        code, message, details = response.data["code"], response.data["message"], response.data.get("details")
        if code == "validation_error":
            message = "invalid request: " + "; ".join(_problems(details))
        response.data = sqlrs_error(code, message, details)
    return response


@csrf_exempt
def route_not_found(request):
    """Any method on a path under /sqlrs/v1 that names no route."""
    return sqlrs_error_response(404, "not_found", f"no route {request.method} {request.path}")
