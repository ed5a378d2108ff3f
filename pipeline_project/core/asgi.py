"""Django's ASGI handler, with what this project needs of it.

- Lifespan: the process's notification hub and async pool open at startup, close at shutdown.
- Bodies: refused with a 413 past ``MAX_REQUEST_BODY_BYTES`` as they are read, however they
  are sent (a chunked body has no Content-Length for the middleware to check), and given a
  ``CONTENT_LENGTH`` (DRF reads a body without one as empty).
- Streams: a streaming response gives back, before it starts, the database connections and
  the thread its request used. Django keeps one thread per request until the response ends
  (asgiref's ThreadSensitiveContext), so without this every follower of a stream would hold
  an idle thread (and a pooled connection) for as long as it listens.
"""

from asgiref.sync import SyncToAsync, sync_to_async
from django.conf import settings
from django.core.handlers.asgi import ASGIHandler
from django.db import connections

from pipeline_project.core.errors import json_error
from pipeline_project.core.notifications import close_shared_resources, open_shared_resources


class BodyTooLarge(Exception):
    pass


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
        try:
            await super().handle(scope, receive, send)
        except BodyTooLarge:
            limit = settings.MAX_REQUEST_BODY_BYTES
            response = json_error(413, "request_too_large", "The request body is too large.", {"max_bytes": limit})
            await self.send_response(response, send)

    async def read_body(self, receive):
        received = 0

        async def counted():
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > settings.MAX_REQUEST_BODY_BYTES:
                raise BodyTooLarge
            return message

        body_file = await super().read_body(counted)
        body_file.received_bytes = received
        return body_file

    def create_request(self, scope, body_file):
        request, error_response = super().create_request(scope, body_file)
        if request is not None and "CONTENT_LENGTH" not in request.META:
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
