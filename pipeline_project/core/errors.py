"""The one error shape of the API: ``{"code": ..., "message": ..., "details": {...}}``.

Services raise :class:`ApplicationError` subclasses; they know nothing about HTTP beyond
the status they suggest. The DRF exception handler and Django's error views below turn
every 4xx (and the 500 that should never happen) into that shape.
"""

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404, JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


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
        details = {"wait_seconds": exc.wait} if isinstance(exc, exceptions.Throttled) else {}
        response.data = error_body(code, str(exc.detail), details)
    return response


def json_error(status_code: int, code: str, message: str, details: dict | None = None) -> JsonResponse:
    return JsonResponse(error_body(code, message, details), status=status_code)
