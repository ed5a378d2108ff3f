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
