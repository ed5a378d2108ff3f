"""The project's middleware, every one usable in both of Django's modes.

An async view (a process call, which waits for its answer) runs behind the same stack as every
other view. Django runs a synchronous-only middleware in a thread, and with it everything inside
it, the waiting view included; a ``MiddlewareMixin`` in async mode hops to a thread and back for
each hook. ``OnLoopMixin`` runs the hooks of a middleware that does no I/O on the event loop
instead; Django's own middleware are listed in settings through the subclasses below.
"""

import logging
import re
import time
import uuid

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.conf import settings
from django.contrib.auth.middleware import AuthenticationMiddleware as DjangoAuthenticationMiddleware
from django.contrib.messages.middleware import MessageMiddleware as DjangoMessageMiddleware
from django.contrib.messages.storage import default_storage
from django.contrib.sessions.middleware import SessionMiddleware as DjangoSessionMiddleware
from django.middleware.clickjacking import XFrameOptionsMiddleware as DjangoXFrameOptionsMiddleware
from django.middleware.common import CommonMiddleware as DjangoCommonMiddleware
from django.middleware.csrf import CsrfViewMiddleware as DjangoCsrfViewMiddleware
from django.middleware.security import SecurityMiddleware as DjangoSecurityMiddleware
from django.utils.deprecation import MiddlewareMixin
from django.utils.functional import SimpleLazyObject, empty
from django.utils.module_loading import import_string
from whitenoise.middleware import WhiteNoiseMiddleware as BaseWhiteNoiseMiddleware

from pipeline_project.api.errors import error_shape, json_error, status_error
from pipeline_project.db.outages import OUTAGES
from pipeline_project.logging import request_id_var
from pipeline_project.web.error_views import bad_request

access_log = logging.getLogger("pipeline.access")
_VALID_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
HEALTH_PATH = "/health"  # answered whatever the Host, on every port, on the event loop
_QUIET_PATHS = frozenset({HEALTH_PATH})


class OnLoopMixin(MiddlewareMixin):
    """In an async request, the hooks run on the event loop: only for hooks that do no I/O (a
    response that ``needs_thread`` is finished in one, as Django would)."""

    def __init__(self, get_response):
        super().__init__(get_response)
        if self.async_mode and hasattr(self, "process_view"):
            process_view = self.process_view

            async def process_view_on_loop(*args):  # Django would adapt a synchronous one with a hop
                return process_view(*args)

            self.process_view = process_view_on_loop

    def needs_thread(self, request) -> bool:
        return False

    async def __acall__(self, request):
        response = self.process_request(request) if hasattr(self, "process_request") else None
        response = response or await self.get_response(request)
        if not hasattr(self, "process_response"):
            return response
        if self.needs_thread(request):
            return await sync_to_async(self.process_response)(request, response)
        return self.process_response(request, response)


class SecurityMiddleware(OnLoopMixin, DjangoSecurityMiddleware):
    pass


class XFrameOptionsMiddleware(OnLoopMixin, DjangoXFrameOptionsMiddleware):
    pass


class SessionMiddleware(OnLoopMixin, DjangoSessionMiddleware):
    def needs_thread(self, request) -> bool:  # the session is saved
        session = getattr(request, "session", None)
        return session is not None and (session.modified or settings.SESSION_SAVE_EVERY_REQUEST)


class CommonMiddleware(OnLoopMixin, DjangoCommonMiddleware):
    pass


class CsrfViewMiddleware(OnLoopMixin, DjangoCsrfViewMiddleware):
    """(The token is kept in a cookie: CSRF_USE_SESSIONS would read the session.)"""


class AuthenticationMiddleware(OnLoopMixin, DjangoAuthenticationMiddleware):
    """(It only sets ``request.user`` up, read when first used.)"""


class MessageMiddleware(OnLoopMixin, DjangoMessageMiddleware):
    """Messages' storage is made when first used (an API request never does): making it sets up
    cookie signing, a tenth of a small request's time. (Messages are stored in a cookie or the
    session's data, saved by SessionMiddleware.)"""

    def process_request(self, request):
        request._messages = SimpleLazyObject(lambda: default_storage(request))

    def process_response(self, request, response):
        messages = getattr(request, "_messages", None)
        if isinstance(messages, SimpleLazyObject) and messages._wrapped is empty:  # never used
            return response
        return super().process_response(request, response)


class ProbeMiddleware:
    """Probes before anything reads the Host: ``/health`` answers whatever the Host on every port
    (an orchestrator's httpGet probe sends the pod's address, which no ALLOWED_HOSTS lists). On
    the probe port (``settings.WEB_PROBE_PORT``) only the paths ``settings.WEB_PROBE_ANSWERS`` maps
    to their views (dotted paths) are served, with no token and whatever the Host; any other path is
    404 there. The others (/status, /metrics) read the database: in async mode they are answered in
    a thread, /health on the loop."""

    sync_capable = async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        self.async_mode = iscoroutinefunction(get_response)
        if self.async_mode:
            markcoroutinefunction(self)

    def __call__(self, request):
        if self.async_mode:
            return self.__acall__(request)
        answer = self._answer(request)
        return answer(request) if answer else self.get_response(request)

    async def __acall__(self, request):
        answer = self._answer(request)
        if answer is None:
            return await self.get_response(request)
        return answer(request) if request.path == HEALTH_PATH else await sync_to_async(answer)(request)

    @staticmethod
    def _answer(request):
        if request.path == HEALTH_PATH:
            return import_string(settings.WEB_PROBE_ANSWERS[HEALTH_PATH])
        if settings.WEB_PROBE_PORT is None or request.META.get("SERVER_PORT") != settings.WEB_PROBE_PORT:
            return None
        answer = settings.WEB_PROBE_ANSWERS.get(request.path)  # each answers GET and HEAD only
        return _probe_port_not_found if answer is None else import_string(answer)


def _probe_port_not_found(request):
    served = ", ".join(settings.WEB_PROBE_ANSWERS)
    return json_error(request.path, 404, "not_found", f"The probe port serves only {served}.")


class WhiteNoiseMiddleware(BaseWhiteNoiseMiddleware):
    """WhiteNoise, usable in async mode: a request for anything but a static file goes on on
    the event loop; a static file is found and served in a thread (the file system)."""

    sync_capable = async_capable = True

    def __init__(self, get_response=None, settings=settings):
        super().__init__(get_response, settings)
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request):
        if iscoroutinefunction(self):
            return self._serve_async(request)
        return super().__call__(request)

    async def _serve_async(self, request):
        if self.autorefresh:
            static_file = await sync_to_async(self.find_file)(request.path_info)
        else:
            static_file = self.files.get(request.path_info)
        if static_file is not None:
            return await sync_to_async(self.serve)(static_file, request)
        return await self.get_response(request)


class RequestIdMiddleware(OnLoopMixin):
    """Give every request an id (the caller's X-Request-ID if sane), log one access line."""

    def process_request(self, request):
        incoming = request.headers.get("X-Request-ID", "")
        request.request_id = incoming if _VALID_REQUEST_ID.match(incoming) else uuid.uuid4().hex
        request.request_id_reset = request_id_var.set(request.request_id)
        request.started_at = time.perf_counter()

    def process_response(self, request, response):
        response["X-Request-ID"] = request.request_id
        if response.status_code < 500 and request.path not in _QUIET_PATHS:
            OUTAGES.answered()  # ends an outage the API met (pipeline_project.db.outages)
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
                "duration_ms": round((time.perf_counter() - request.started_at) * 1000, 2),
            },
        )
        request_id_var.reset(request.request_id_reset)
        return response


class JSONErrorsMiddleware(OnLoopMixin):
    """On the API's paths, an error answered without a JSON body gets one in the path's shape.

    Django's error views cover raised errors; this covers the answers some part of the stack
    returns itself: Django's 405 for a method a plain view lacks, a library's HTML or empty
    error, the technical pages of DEBUG. Headers (``Allow``, ``WWW-Authenticate``) and cookies
    stay. It sits inside every middleware that adds headers, so its answers get them too.
    """

    def process_response(self, request, response):
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


class BodySizeLimitMiddleware(OnLoopMixin):
    """Refuse oversized bodies with 413 before any parser reads them.

    DRF reads request bodies as a stream, so Django's DATA_UPLOAD_MAX_MEMORY_SIZE does not
    protect the API on its own. Under ASGI the handler reads no body whose declared length
    is too large, and counts one sent without a length (pipeline_project.web.handler), so this
    answers every oversized body, under WSGI and ASGI alike.
    """

    def process_request(self, request):
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
        return None


class RejectNulMiddleware(OnLoopMixin):
    """Refuse NUL characters in the path, the query string and form fields with a 400.

    PostgreSQL text cannot hold them: any of them reaching a filter, a search or a form
    would fail a statement (a 500) instead of being refused. JSON bodies are checked by the
    API's parser.
    """

    def process_request(self, request):
        refused = sorted({key for key, value in self._fields(request) if "\x00" in key or "\x00" in value})
        if refused or "\x00" in request.path:
            return bad_request(
                request,
                code="validation_error",
                message="NUL characters are not allowed in URLs or form fields.",
                details={key.replace("\x00", "\\0"): ["Must not contain NUL characters."] for key in refused},
            )
        return None

    @staticmethod
    def _fields(request):
        for query in (request.GET, request.POST):  # POST: form fields only (Django leaves JSON alone)
            for key, values in query.lists():
                for value in values:
                    yield key, value
