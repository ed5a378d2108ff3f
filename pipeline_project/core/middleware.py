import logging
import re
import time
import uuid

from django.conf import settings

from pipeline_project.core.errors import error_shape, json_error, status_error
from pipeline_project.core.views import bad_request
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


class JSONErrorsMiddleware:
    """On the API's paths, an error answered without a JSON body gets one in the path's shape.

    Django's error views cover raised errors; this covers the answers some part of the stack
    returns itself: Django's 405 for a method a plain view lacks, a library's HTML or empty
    error, the technical pages of DEBUG. Headers (``Allow``, ``WWW-Authenticate``) and cookies
    stay. It sits inside every middleware that adds headers, so its answers get them too.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if response.status_code < 400 or not error_shape(request.path) or _is_json(response):
            return response
        replacement = status_error(request.path, response.status_code, method=request.method)
        for header, value in response.items():
            if header.lower() not in ("content-type", "content-length"):
                replacement[header] = value
        replacement.cookies = response.cookies
        response.close()
        return replacement


def _is_json(response) -> bool:
    return response.get("Content-Type", "").split(";")[0].strip().lower() == "application/json"


class BodySizeLimitMiddleware:
    """Refuse oversized bodies with 413 before any parser reads them.

    DRF reads request bodies as a stream, so Django's DATA_UPLOAD_MAX_MEMORY_SIZE does not
    protect the API on its own. Under ASGI the handler reads no body whose declared length
    is too large, and counts one sent without a length (pipeline_project.core.asgi), so this
    answers every oversized body, under WSGI and ASGI alike.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower() and not request.META.get(
            "CONTENT_LENGTH"
        ):
            # A WSGI server hands Django no length for a chunked body, and Django then reads none
            # (the ASGI handler reads the chunks and sets the length).
            return json_error(request.path, 411, "length_required", "Send the body with a Content-Length.")
        raw_length = request.META.get("CONTENT_LENGTH") or "0"
        try:
            length = int(raw_length)
        except ValueError:
            return json_error(request.path, 400, "invalid_content_length", "Content-Length must be an integer.")
        if length < 0:
            return json_error(request.path, 400, "invalid_content_length", "Content-Length must not be negative.")
        if length > settings.MAX_REQUEST_BODY_BYTES:
            return json_error(
                request.path,
                413,
                "request_too_large",
                "The request body is too large.",
                {"max_bytes": settings.MAX_REQUEST_BODY_BYTES, "content_length": length},
            )
        return self.get_response(request)


class RejectNulMiddleware:
    """Refuse NUL characters in the path, the query string and form fields with a 400.

    PostgreSQL text cannot hold them: any of them reaching a filter, a search or a form
    would fail a statement (a 500) instead of being refused. JSON bodies are checked by the
    API's parser.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        refused = sorted({key for key, value in self._fields(request) if "\x00" in key or "\x00" in value})
        if refused or "\x00" in request.path:
            return bad_request(
                request,
                code="validation_error",
                message="NUL characters are not allowed in URLs or form fields.",
                details={key.replace("\x00", "\\0"): ["Must not contain NUL characters."] for key in refused},
            )
        return self.get_response(request)

    @staticmethod
    def _fields(request):
        for query in (request.GET, request.POST):  # POST: form fields only (Django leaves JSON alone)
            for key, values in query.lists():
                for value in values:
                    yield key, value
