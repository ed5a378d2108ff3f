"""Slow clients under the deployed server: a request that stalls, in its headers or in its body,
is closed once WEB_REQUEST_READ_TIMEOUT passes without a byte (a stalled body answered 408); a
slow but steady request is read whole, and a stream the server sends on is not cut, however
long its client stays silent (pipeline_project.web.uvicorn_worker.RequestReadTimeoutProtocol)."""

import json
import socket
import time

import pytest

from jobs.queue import services as jobs
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.core.helpers import error_problem
from tests.e2e.servers import web_server
from tests.helpers import every_scope_token
from tests.jobs.conftest import enqueue

pytestmark = ALL_DATABASES_COMMITTED

READ_TIMEOUT = 2
# The bound's margin: a busy machine's scheduling, and uvloop's timers firing a little early.
EARLY, LATE = 0.1, 1.5


@pytest.fixture
def port():
    with web_server(env={"WEB_REQUEST_READ_TIMEOUT": str(READ_TIMEOUT)}) as (port, _server):
        yield port


def read_until_closed(client: socket.socket, limit: float) -> tuple[bytes, float]:
    """All the server sends until it closes the connection, and how long it took; fails past ``limit``."""
    started = time.monotonic()
    received = b""
    while True:
        client.settimeout(max(limit - (time.monotonic() - started), 0.01))
        try:
            chunk = client.recv(65536)
        except TimeoutError:
            pytest.fail(f"the connection is still open after {limit} s, having received {received[:300]!r}")
        if not chunk:
            return received, time.monotonic() - started
        received += chunk


@pytest.mark.parametrize(
    "sent", [b"", b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n"], ids=["nothing", "headers-unfinished"]
)
def test_a_request_whose_headers_stall_is_closed_unanswered_within_the_timeout(port, sent):
    with socket.create_connection(("127.0.0.1", port)) as client:
        client.sendall(sent)
        received, closed_in = read_until_closed(client, READ_TIMEOUT + LATE)

    assert received == b""
    assert READ_TIMEOUT - EARLY <= closed_in < READ_TIMEOUT + LATE, closed_in


@pytest.mark.parametrize("path", ["/api/v1/jobs/trigger", "/sqlrs/v1/prepare-jobs"])
def test_a_body_shorter_than_its_declared_length_is_answered_408_and_closed_within_the_timeout(port, path):
    with socket.create_connection(("127.0.0.1", port)) as client:
        client.sendall(
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            "Content-Length: 100\r\n\r\n".encode()
            + b'{"queue": "q'  # 12 of the 100 bytes declared, and no more
        )
        received, closed_in = read_until_closed(client, READ_TIMEOUT + LATE)

    head, _, body = received.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {name.strip().lower(): value.strip() for name, value in (line.split(":", 1) for line in lines)}
    assert status_line == "HTTP/1.1 408 Request Timeout"
    assert error_problem(path, 408, headers["content-type"], body) is None
    assert json.loads(body)["code"] == "request_timeout"
    assert headers["connection"] == "close" and int(headers["content-length"]) == len(body)
    assert READ_TIMEOUT - EARLY <= closed_in < READ_TIMEOUT + LATE, closed_in


def test_a_slow_but_steady_request_is_read_whole(port):
    token = every_scope_token("steady")
    body = json.dumps({"queue": "q", "task": "jobs.noop", "lock_key": "steady"}).encode()
    head = (
        f"POST /api/v1/jobs/trigger HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    request = head + body
    # Never a second without a byte, but the whole request takes three times the timeout: the
    # last bytes of its headers and the first of its body, one a second.
    trickled = range(len(head) - 3, len(head) + 3)
    with socket.create_connection(("127.0.0.1", port)) as client:
        started = time.monotonic()
        client.sendall(request[: trickled.start])
        for index in trickled:
            time.sleep(1)
            client.sendall(request[index : index + 1])
        client.sendall(request[trickled.stop :])
        sent_in = time.monotonic() - started
        received, _ = read_until_closed(client, 10)

    assert sent_in >= 3 * READ_TIMEOUT
    assert received.startswith(b"HTTP/1.1 201 "), received[:300]
    assert json.loads(received.partition(b"\r\n\r\n")[2])["created"] is True


def test_an_event_stream_the_client_sends_nothing_on_outlives_the_timeout(port):
    """The client sends its request and then only reads: the server waits on the job, not on it."""
    token = every_scope_token("follower")
    job_id = enqueue(task="never.runs").job_id  # no worker: it stays queued until canceled
    with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
        client.sendall(
            f"GET /api/v1/jobs/{job_id}/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\r\n".encode()
        )
        received = b""
        while b'"queued"' not in received:
            chunk = client.recv(65536)
            assert chunk, f"the stream closed early: {received[:300]!r}"
            received += chunk
        time.sleep(3 * READ_TIMEOUT)
        jobs.job_cancel(job_id=job_id)  # the stream's next event, and its end
        received, _ = read_until_closed(client, 10)

    assert b'"canceled"' in received and received.endswith(b"0\r\n\r\n"), received[-300:]
