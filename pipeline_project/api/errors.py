"""The one error shape of the API: ``{"code": ..., "message": ..., "details": {...}}``.

Services raise :class:`ApplicationError` subclasses; they know nothing about HTTP beyond
the status they suggest. The DRF exception handler, Django's error views and the middleware
turn every 4xx (and the 500 that should never happen) into that shape, or into the shape
``JSON_ERROR_PATHS`` names for the path (sqlrs's ErrorResponse under /sqlrs/).
"""

from collections.abc import Callable
from functools import lru_cache
from http import HTTPStatus

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.db import DatabaseError
from django.http import Http404
from django.utils.module_loading import import_string
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from pipeline_project.api.rendering import JSONAnswer
from pipeline_project.db.connections import is_transient_error
from pipeline_project.db.outages import OUTAGES


class ApplicationError(Exception):
    status = status.HTTP_400_BAD_REQUEST
    code = "invalid"

    def __init__(self, message: str, *, code: str | None = None, details: dict | None = None):
        super().__init__(message)
        self.message = message
        self.code = code or self.code
        self.details = details or {}


class InvalidInputError(ApplicationError):
    status = status.HTTP_400_BAD_REQUEST
    code = "validation_error"


class NotFoundError(ApplicationError):
    status = status.HTTP_404_NOT_FOUND
    code = "not_found"


class ConflictError(ApplicationError):
    status = status.HTTP_409_CONFLICT
    code = "conflict"


def error_body(code: str, message: str, details: dict | None = None) -> dict:
    return {"code": code, "message": message, "details": details or {}}


def _validation_details(data) -> dict:
    if isinstance(data, dict):
        return data
    return {"non_field_errors": data if isinstance(data, list) else [data]}


def api_exception_handler(exc, context):
    if isinstance(exc, ApplicationError):
        return Response(error_body(exc.code, exc.message, exc.details), status=exc.status)
    if isinstance(exc, DatabaseError) and is_transient_error(exc):  # down, restarting, or no free pooled connection
        OUTAGES.failed(exc, during="answering requests")
        response = Response(error_body("database_unavailable", "The database is unavailable; try again."), status=503)
        response["Retry-After"] = "1"
        response._has_been_logged = True  # the outage is logged once above, not once per request by Django
        return response
    if isinstance(exc, exceptions.NotAuthenticated):
        hint = f"{exc.detail.rstrip('.')}: send 'Authorization: Bearer <token>' (or sign in, for staff)."
        exc.detail = exceptions.ErrorDetail(hint, code=exc.detail.code)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()

    response = drf_exception_handler(exc, context)  # keeps WWW-Authenticate and Retry-After
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        response.data = error_body("validation_error", "The request is invalid.", _validation_details(exc.detail))
    else:
        codes = exc.get_codes()
        code = codes if isinstance(codes, str) else exc.default_code
        details = {"wait_seconds": exc.wait} if isinstance(exc, exceptions.Throttled) else getattr(exc, "details", {})
        response.data = error_body(code, str(exc.detail), details)
    return response


def json_error(path: str, status_code: int, code: str, message: str, details: dict | None = None) -> JSONAnswer:
    """An error answer in the shape of ``path``'s errors (the project's where no shape is named)."""
    build = error_shape(path) or error_body
    return JSONAnswer(build(code, message, details), status=status_code)


def error_shape(path: str) -> Callable[..., dict] | None:
    """The body builder of ``path``'s errors, or None where errors are Django's HTML pages."""
    for inside, build in _error_shapes(tuple(settings.JSON_ERROR_PATHS.items())):
        if path == inside.rstrip("/") or path.startswith(inside):
            return build
    return None


@lru_cache(maxsize=8)
def _error_shapes(configured: tuple) -> list[tuple[str, Callable[..., dict]]]:
    shapes = [
        (prefix if prefix.endswith("/") else f"{prefix}/", import_string(dotted)) for prefix, dotted in configured
    ]
    return sorted(shapes, key=lambda shape: -len(shape[0]))  # the most specific prefix first


# Codes of the statuses an error can reach a JSON path with, without a view naming its own
# (the rest are their HTTP phrase: 404 not_found, 405 method_not_allowed, ...).
STATUS_CODES = {
    400: "bad_request",
    401: "not_authenticated",
    403: "permission_denied",
    413: "request_too_large",
    500: "server_error",
}


def status_error(path: str, status_code: int, *, method: str = "") -> JSONAnswer:
    """A JSON error for a status some part of the stack answered without a JSON body."""
    try:
        phrase = HTTPStatus(status_code).phrase
    except ValueError:
        phrase = "Error"
    code = STATUS_CODES.get(status_code) or phrase.lower().replace(" ", "_").replace("-", "_")
    message = f'Method "{method}" not allowed.' if status_code == 405 else f"{phrase}."
    return json_error(path, status_code, code, message)
