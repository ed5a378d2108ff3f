"""Django's ASGI handler, with what this project needs of it.

- Lifespan: the process's notification hub and async pool open at startup, close at shutdown.
- Bodies: Django reads the whole body before any middleware runs. A body whose declared
  Content-Length is past ``MAX_REQUEST_BODY_BYTES`` is not read at all, and one sent without a
  length (chunked) stops being read once it passes the limit; either way the request goes on
  with no body and a ``CONTENT_LENGTH`` past the limit, so BodySizeLimitMiddleware answers its
  413 through the whole middleware stack (security headers and all), at once, as it does
  under WSGI. A body read whole gets the ``CONTENT_LENGTH`` it was read with (DRF reads a
  body without one as empty).
- Streams: a streaming response gives back, before it starts, the database connections and
  the thread its request used. Django keeps one thread per request until the response ends
  (asgiref's ThreadSensitiveContext), so without this every follower of a stream would hold
  an idle thread (and a pooled connection) for as long as it listens.
"""

import asyncio

from asgiref.sync import SyncToAsync, sync_to_async
from django.conf import settings
from django.core.handlers.asgi import ASGIHandler
from django.db import connections

from pipeline_project.core.notifications import close_shared_resources, open_shared_resources


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


def declared_length(scope) -> int | None:
    """The request's Content-Length, when it declares a well-formed one."""
    for name, value in scope.get("headers", ()):
        if name.lower() == b"content-length":
            return int(value) if value.isdigit() else None
    return None


class ProjectASGIHandler(ASGIHandler):
    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        await super().__call__(scope, receive, send)

    async def _lifespan(self, receive, send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await open_shared_resources()
                except Exception as exc:  # the server reports it and does not start
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await close_shared_resources()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def handle(self, scope, receive, send):
        body = BoundedBody(receive, declared_length=declared_length(scope), limit=settings.MAX_REQUEST_BODY_BYTES)

        async def send_closing_if_refused(message):
            if body.refused and message["type"] == "http.response.start":
                # The server would otherwise go on reading (and dropping) the body the client sends.
                message = {**message, "headers": [*message.get("headers", ()), (b"connection", b"close")]}
            await send(message)

        await super().handle(scope, body, send_closing_if_refused)

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

    async def send_response(self, response, send):
        if response.streaming:
            await sync_to_async(connections.close_all)()  # in the request's thread, whose connections they are
            context = SyncToAsync.thread_sensitive_context.get(None)
            executor = SyncToAsync.context_to_thread_executor.pop(context, None) if context else None
            if executor is not None:
                executor.shutdown(wait=False)  # its thread ends; a later sync call gets a new one
        await super().send_response(response, send)
