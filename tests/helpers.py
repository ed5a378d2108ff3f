"""Small helpers shared by tests that watch other threads or processes."""

import socket
import time


def wait_for(condition, *, timeout: float = 10.0, interval: float = 0.02, what: str = "condition"):
    """Poll ``condition()`` until it returns something truthy; return it, or fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def asgi_get(path: str, *, token: str, **headers) -> tuple[int, dict, bytes]:
    """GET through Django's ASGI test client (a streaming response read to its end): (status, headers, body)."""
    from asgiref.sync import async_to_sync
    from django.test import AsyncClient

    async def get():
        response = await AsyncClient().get(path, headers={"Authorization": f"Bearer {token}", **headers})
        if response.streaming:
            body = b"".join([chunk async for chunk in response.streaming_content])
        else:
            body = response.content
        return response.status_code, dict(response.headers), body

    return async_to_sync(get)()
