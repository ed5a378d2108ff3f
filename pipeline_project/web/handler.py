"""Django's ASGI handler, with what this project needs of it.

- Two kinds of route. A synchronous view (every ordinary DRF view) is served as under WSGI:
  the whole request (signals, the synchronous middleware chain, the view, closing the
  response) runs in one thread of a bounded pool (``WEB_THREADS``), one hop from the event
  loop and back. Django's own async path would run each synchronous middleware behind its own
  hop and start a thread per request. An async view (process calls) is served by Django's
  async path, waiting on the event loop: its middleware run on the loop (web.middleware), its
  synchronous parts in the same pool, each giving its connections back as it ends.
- Lifespan: the process's notification hub and async pool open at startup, close at shutdown.
- Bodies: Django reads the whole body before any middleware runs. A body whose declared
  Content-Length is past ``MAX_REQUEST_BODY_BYTES`` is not read at all, and one sent without a
  length (chunked) stops being read once it passes the limit; either way the request goes on
  with no body and a ``CONTENT_LENGTH`` past the limit, so BodySizeLimitMiddleware answers its
  413 through the whole middleware stack (security headers and all), at once, as it does
  under WSGI. A body read whole gets the ``CONTENT_LENGTH`` it was read with (DRF reads a
  body without one as empty).
- Streams: a streaming response gives back, before it starts, the database connections and
  the thread its request used, so a follower of a stream holds neither a thread nor a pooled
  connection for as long as it listens: the stream itself is sent from the event loop.
"""

import asyncio
import contextvars
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing

from asgiref.sync import ThreadSensitiveContext, iscoroutinefunction
from django.conf import settings
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.core.handlers.base import BaseHandler
from django.db import connections
from django.urls import Resolver404, get_resolver, set_script_prefix

from pipeline_project.web.waiting import close_shared_resources, open_shared_resources


class BoundedBody:
    """A request's ``receive``, reading its body only while it stays within the limit.

    Once the body is refused (declared too large, or past the limit as it arrives), Django's
    body reader gets an empty last chunk, and nothing more is asked of the server: Django's
    disconnect listener waits until the answer is sent and it is cancelled. So the server reads
    no more of the body (nor sends ``100 Continue`` for one declared too large).
    """

    def __init__(self, receive, *, declared_length: int | None, limit: int):
        self._receive = receive
        self._limit = limit
        self.received = 0
        self.refused = declared_length is not None and declared_length > limit
        self._body_done = False

    async def __call__(self):
        if self.refused:
            if not self._body_done:
                self._body_done = True
                return {"type": "http.request", "body": b"", "more_body": False}
            await asyncio.Event().wait()  # until cancelled: the 413 is answered at once
        message = await self._receive()
        if message["type"] == "http.request" and not self._body_done:
            self.received += len(message.get("body", b""))
            self._body_done = not message.get("more_body", False)
            if self.received > self._limit:
                self.refused = self._body_done = True
                return {"type": "http.request", "body": b"", "more_body": False}
        return message


def closing_if_refused(send, body: BoundedBody):
    """``send``, closing the connection after an answer to a refused body: the server would
    otherwise go on reading (and dropping) the body the client sends."""

    async def send_closing_if_refused(message):
        if body.refused and message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), (b"connection", b"close")]}
        await send(message)

    return send_closing_if_refused


def declared_length(scope) -> int | None:
    """The request's Content-Length, when it declares a well-formed one."""
    for name, value in scope.get("headers", ()):
        if name.lower() == b"content-length":
            return int(value) if value.isdigit() else None
    return None


class ResolvedOnceHandler(BaseHandler):
    """A handler's middleware chain, taking the route the ASGI handler resolved already (to
    choose between the two paths) instead of resolving the path again: the synchronous chain,
    and, as a base of ProjectASGIHandler, the async one."""

    def resolve_request(self, request):
        path, match = request.scope.get("resolved", (None, None))
        if path != request.path_info or hasattr(request, "urlconf"):  # a middleware chose another urlconf
            return super().resolve_request(request)
        request.resolver_match = match
        return match


class ProjectASGIHandler(ResolvedOnceHandler, ASGIHandler):
    def __init__(self):
        super().__init__()
        self.sync_chain = ResolvedOnceHandler()
        self.sync_chain.load_middleware(is_async=False)
        self.threads = ThreadPoolExecutor(settings.WEB_THREADS, thread_name_prefix="web")

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)  # Django refuses it
            return
        body = BoundedBody(receive, declared_length=declared_length(scope), limit=settings.MAX_REQUEST_BODY_BYTES)
        send = closing_if_refused(send, body)
        if self._is_async_route(scope):
            # Its synchronous parts run in the same pool, not in a thread started per request.
            async with ThreadSensitiveContext(executor=self.threads):
                await self.handle_request(scope, body, send, on_loop=True)
        else:
            await self.handle_request(scope, body, send, on_loop=False)

    async def _lifespan(self, receive, send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await open_shared_resources()
                except Exception as exc:  # noqa: BLE001 - not swallowed: the server reports it and does not start
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await close_shared_resources()
                self.threads.shutdown(wait=False)
                await send({"type": "lifespan.shutdown.complete"})
                return

    @staticmethod
    def _is_async_route(scope) -> bool:
        path = scope["path"].removeprefix(scope.get("root_path", "")) or "/"
        try:
            match = get_resolver(settings.ROOT_URLCONF).resolve(path)
        except Resolver404:
            return False
        scope["resolved"] = (path, match)
        return iscoroutinefunction(match.func)

    async def handle_request(self, scope, body: BoundedBody, send, *, on_loop: bool) -> None:
        """A request, start to end: an async view's on the event loop (a client hanging up
        cancels it), a synchronous view's in one thread of the pool. A stream is sent from the
        loop; a follower hanging up ends it."""
        try:
            body_file = await self.read_body(body)
        except RequestAborted:
            return
        with closing(body_file):
            set_script_prefix(get_script_prefix(scope))
            loop = asyncio.get_running_loop()
            if on_loop:
                response = await self._until_disconnect(self._respond_on_loop(scope, body_file), body)
                if response is None:
                    signals.request_finished.send(sender=self.__class__)
                    return
            else:
                context = contextvars.copy_context()  # the request's context vars (script prefix) in the thread
                response = await loop.run_in_executor(self.threads, context.run, self._respond, scope, body_file)
            if not response.streaming:
                await self.send_response(response, send)  # closed already
                return
            try:
                await self._until_disconnect(self.send_response(response, send), body)
            finally:
                await loop.run_in_executor(self.threads, response.close)

    async def _until_disconnect(self, awaitable, body: BoundedBody):
        """What ``awaitable`` returns, or None once the client has hung up (it is cancelled)."""
        result = None
        try:
            async with asyncio.TaskGroup() as group:
                listener = group.create_task(self.listen_for_disconnect(body))
                result = await awaitable
                listener.cancel()
        except* RequestAborted:
            pass
        return result

    def _respond(self, scope, body_file):
        """The request, start to end, as the WSGI handler serves it; a stream's content is left
        to the event loop, with this thread's connections given back first."""
        signals.request_started.send(sender=self.__class__, scope=scope)
        request, response = self.create_request(scope, body_file)
        if request is not None:
            response = self.sync_chain.get_response(request)
        return self._closed_unless_streaming(response)

    async def _respond_on_loop(self, scope, body_file):
        """``_respond`` for an async view. The signals' receivers (Django's: close old
        connections, reset queries and caches) are called on the loop, not each behind a hop to
        a thread: the loop's thread holds no connection to close."""
        signals.request_started.send(sender=self.__class__, scope=scope)
        request, response = self.create_request(scope, body_file)
        if request is not None:
            response = await self.get_response_async(request)
        return self._closed_unless_streaming(response)

    def _closed_unless_streaming(self, response):
        response._handler_class = self.__class__
        if response.streaming:
            connections.close_all()
        else:
            response.close()
        return response

    async def read_body(self, receive):
        body_file = await super().read_body(receive)
        if receive.refused:  # what arrived before the limit was passed is dropped: nothing may read it
            body_file.seek(0)
            body_file.truncate()
        body_file.received_bytes = receive.received
        return body_file

    def create_request(self, scope, body_file):
        request, error_response = super().create_request(scope, body_file)
        if request is not None and "CONTENT_LENGTH" not in request.META:  # a chunked body
            request.META["CONTENT_LENGTH"] = str(body_file.received_bytes)
        return request, error_response
