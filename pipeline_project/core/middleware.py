import logging
import re
import time
import uuid

from django.conf import settings

from pipeline_project.core.errors import json_error
from pipeline_project.logging import request_id_var

access_log = logging.getLogger("pipeline.access")
_VALID_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_QUIET_PATHS = frozenset({"/health"})


class RequestIdMiddleware:
    """Give every request an id (the caller's X-Request-ID if sane), log one access line."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        incoming = request.headers.get("X-Request-ID", "")
        request_id = incoming if _VALID_REQUEST_ID.match(incoming) else uuid.uuid4().hex
        request.request_id = request_id
        reset = request_id_var.set(request_id)
        started = time.perf_counter()
        try:
            response = self.get_response(request)
            response["X-Request-ID"] = request_id
            access_log.log(
                logging.DEBUG if request.path in _QUIET_PATHS else logging.INFO,
                "%s %s %s",
                request.method,
                request.path,
                response.status_code,
                extra={
                    "method": request.method,
                    "path": request.path,
                    "status": response.status_code,
                    "duration_ms": round((time.perf_counter() - started) * 1000, 2),
                },
            )
            return response
        finally:
            request_id_var.reset(reset)


class BodySizeLimitMiddleware:
    """Refuse oversized bodies with 413 before any parser reads them.

    DRF reads request bodies as a stream, so Django's DATA_UPLOAD_MAX_MEMORY_SIZE does not
    protect the API on its own.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        raw_length = request.META.get("CONTENT_LENGTH") or "0"
        try:
            length = int(raw_length)
        except ValueError:
            return json_error(400, "invalid_content_length", "Content-Length must be an integer.")
        if length < 0:
            return json_error(400, "invalid_content_length", "Content-Length must not be negative.")
        if length > settings.MAX_REQUEST_BODY_BYTES:
            return json_error(
                413,
                "request_too_large",
                "The request body is too large.",
                {"max_bytes": settings.MAX_REQUEST_BODY_BYTES, "content_length": length},
            )
        return self.get_response(request)
