"""The ASGI handler bounds bodies before Django reads them: a declared length past the limit is
answered at once, without reading, and a body without one stops being read past the limit; the
413 passes through the middleware like any answer. (tests/e2e/test_web_server.py does the same
against the deployed server.)"""

import asyncio
import json
import threading

import pytest

from pipeline_project.web.handler import ProjectASGIHandler
from tests.conftest import ALL_DATABASES
from tests.core.helpers import error_problem, missing_security_headers

pytestmark = [ALL_DATABASES, pytest.mark.urls("tests.core.urls")]
MiB = 1024 * 1024


def scope(path: str, headers: list[tuple[bytes, bytes]]) -> dict:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"localhost"), (b"content-type", b"application/json"), *headers],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }


class SlowClient:
    """Sends ``chunks`` of a body; then, unless it ``ends`` there, nothing more (the rest of a huge
    body that never comes)."""

    def __init__(self, chunks: list[bytes], *, ends: bool = False):
        self.chunks = list(chunks)
        self.ends = ends
        self.sent = 0

    async def receive(self):
        if not self.chunks:
            await asyncio.Event().wait()  # blocks until cancelled (Django listens for a disconnect)
        chunk = self.chunks.pop(0)
        self.sent += len(chunk)
        return {"type": "http.request", "body": chunk, "more_body": bool(self.chunks) or not self.ends}


def call(path: str, headers: list, client: SlowClient, *, timeout: float = 5) -> tuple[int, dict, bytes]:
    messages = []

    async def send(message):
        messages.append(message)

    async def run():
        await asyncio.wait_for(ProjectASGIHandler()(scope(path, headers), client.receive, send), timeout)

    asyncio.run(run())
    start = next(message for message in messages if message["type"] == "http.response.start")
    body = b"".join(message.get("body", b"") for message in messages if message["type"] == "http.response.body")
    return start["status"], {name.decode(): value.decode() for name, value in start["headers"]}, body


@pytest.mark.parametrize("path", ["/api/v1/jobs/trigger", "/sqlrs/v1/prepare-jobs"])
def test_a_huge_declared_length_is_answered_at_once_without_reading(path, settings):
    client = SlowClient([b'{"queue": "q"'])

    status, headers, body = call(path, [(b"content-length", b"1000000000000")], client)

    assert status == 413
    assert error_problem(path, status, headers["Content-Type"], body) is None
    assert not missing_security_headers(headers)
    assert headers["connection"] == "close"
    assert client.sent == 0  # not a byte was asked of the server


def test_a_body_without_a_length_stops_being_read_past_the_limit(settings):
    settings.MAX_REQUEST_BODY_BYTES = 2 * MiB
    client = SlowClient([b"x" * MiB] * 5)  # then it stalls: never the end of the body

    status, headers, body = call("/api/v1/jobs/trigger", [(b"transfer-encoding", b"chunked")], client)

    assert status == 413 and json.loads(body)["code"] == "request_too_large"
    assert client.sent == 3 * MiB  # the chunk that passed the limit was the last one asked for
    assert not missing_security_headers(headers) and headers["connection"] == "close"


@pytest.mark.parametrize("length", [None, 3 * MiB])
def test_a_body_within_the_limit_is_read_whole(length):
    body = b"x" * (3 * MiB)
    client = SlowClient([body[: MiB // 2], body[MiB // 2 :]], ends=True)
    headers = [(b"transfer-encoding", b"chunked")] if length is None else [(b"content-length", str(length).encode())]

    status, response_headers, answer = call("/api/test/body-length", headers, client)

    assert status == 200 and json.loads(answer) == {"received": 3 * MiB}
    assert "connection" not in response_headers


def test_a_synchronous_view_runs_in_the_pool_and_an_async_one_on_the_event_loop():
    def thread_of(kind: str) -> dict:
        status, _headers, answer = call(f"/api/test/thread/{kind}", [], SlowClient([b""], ends=True))
        assert status == 200
        return json.loads(answer)

    loop_thread = threading.current_thread().name  # asyncio.run runs the loop in this thread

    assert thread_of("sync")["view"].startswith("web")
    assert thread_of("async") == {"view": loop_thread, "synchronous_part": AnyPoolThread()}


class AnyPoolThread:
    __hash__ = None  # compares equal to many names: unhashable, as any class defining __eq__ alone

    def __eq__(self, name) -> bool:
        return name.startswith("web")
