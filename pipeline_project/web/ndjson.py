"""NDJSON answers: one JSON value per line, each sent as soon as it is found.

:func:`follow_response` is the event streams' (a job's events, a prepare job's): an async
generator, so a follower waits on the event loop, not in a thread. It reads with a pooled
connection, then waits on the process's notification hub for the NOTIFY naming its key,
re-reading on a slow timer too in case one was lost (:func:`pipeline_project.web.follow.follow`).
It ends when the stream's read says it is done, after ``DL_EVENTS_MAX_FOLLOW_SEC`` (the client
resumes from where it got to), or when the client goes away (Django cancels it).
"""

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any

from django.conf import settings
from django.http import StreamingHttpResponse
from prometheus_client import Gauge

from pipeline_project.api.rendering import json_text
from pipeline_project.web.follow import Read, follow
from pipeline_project.web.waiting import waiting_resources

NDJSON = "application/x-ndjson"
HEADERS = {"X-Accel-Buffering": "no", "Cache-Control": "no-store"}  # no proxy holds lines back; nothing kept

OPEN_STREAMS = Gauge(
    "http_event_streams_open", "Event streams being followed right now.", ["stream"], multiprocess_mode="livesum"
)

# A stream's read, made for the pooled connections it reads with.
ReadOf = Callable[[Any], Callable[[dict[str, str]], Awaitable[Read]]]


def ndjson_response(
    lines: AsyncIterator[str], *, status: int = 200, headers: dict | None = None
) -> StreamingHttpResponse:
    """A streaming answer of ``lines`` (each one JSON value and its newline)."""
    return StreamingHttpResponse(lines, status=status, content_type=NDJSON, headers={**HEADERS, **(headers or {})})


def follow_response(
    read_of: ReadOf, *, stream: str, channel: str, key: str | None, status: int = 200, headers: dict | None = None
) -> StreamingHttpResponse:
    """What ``read_of(pool)`` finds, a line each, followed on ``channel`` for ``key`` (None: read until the read says
    done or has nothing more now, without waiting). ``stream`` names it in ``OPEN_STREAMS``."""
    return ndjson_response(_followed(read_of, stream=stream, channel=channel, key=key), status=status, headers=headers)


async def _followed(read_of: ReadOf, *, stream: str, channel: str, key: str | None):
    deadline = time.monotonic() + settings.DL_EVENTS_MAX_FOLLOW_SEC
    open_streams = OPEN_STREAMS.labels(stream=stream)
    open_streams.inc()
    try:
        async with AsyncExitStack() as stack:
            resources = await stack.enter_async_context(waiting_resources())
            subscription = None
            if key is not None:  # subscribed before the first read: nothing written after it is missed
                subscription = await stack.enter_async_context(resources.hub.subscribe(channel, [key]))
            items = follow(
                subscription, read_of(resources.pool), deadline=deadline, recheck_sec=settings.DL_EVENTS_RECHECK_SEC
            )
            stack.push_async_callback(items.aclose)
            async for item in items:
                yield json_text(item) + "\n"
    finally:
        open_streams.dec()
