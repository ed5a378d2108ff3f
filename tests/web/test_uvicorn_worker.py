"""The web server's worker (pipeline_project.web.uvicorn_worker): a listening socket of its own
per worker, and an HTTP protocol that waits a bounded time for each byte of a request."""

import asyncio
import json
import socket
import time
from contextlib import asynccontextmanager

import pytest
from uvicorn.config import Config
from uvicorn.server import ServerState

from pipeline_project.web.uvicorn_worker import RequestReadTimeoutProtocol, own_listener
from tests.core.helpers import error_problem

ROUND_TRIPS = 30
READ_TIMEOUT = 0.3
# The bound's margin: uvloop's timers fire a few milliseconds early, a busy machine's late.
EARLY, LATE = 0.05, 0.5


def test_answers_written_in_two_sends_go_out_at_once_under_asyncios_loop():
    """Without TCP_NODELAY on the accepted connection, each answer's second send waits for the
    client's delayed ACK (40 ms on Linux): 30 round trips would take over a second."""
    shared = socket.create_server(("127.0.0.1", 0), reuse_port=True)  # as gunicorn_conf makes it
    own = own_listener(shared, backlog=8)

    async def answer(reader, writer):
        while await reader.readline():
            writer.write(b"head\n")  # as uvicorn sends a response: its head, then its body
            writer.write(b"body\n")
            await writer.drain()
        writer.close()

    async def exchange() -> float:
        server = await asyncio.start_server(answer, sock=own)
        reader, writer = await asyncio.open_connection(*own.getsockname()[:2])
        started = time.perf_counter()
        for _ in range(ROUND_TRIPS):
            writer.write(b"ask\n")
            assert await reader.readline() == b"head\n"
            assert await reader.readline() == b"body\n"
        elapsed = time.perf_counter() - started
        writer.close()
        server.close()
        return elapsed

    try:
        elapsed = asyncio.run(exchange(), loop_factory=asyncio.SelectorEventLoop)  # not the suite's uvloop
    finally:
        shared.close()
        own.close()

    assert elapsed < 0.5, f"{ROUND_TRIPS} round trips took {elapsed:.2f} s: answers wait for delayed ACKs"


@pytest.fixture(autouse=True)
def short_read_timeout(monkeypatch):
    monkeypatch.setattr(RequestReadTimeoutProtocol, "read_timeout", READ_TIMEOUT)


RECEIVED: list[str] = []  # the types of the messages app received, in the test running


async def app(scope, receive, send):
    """Reads the whole body and answers its length; ``/late`` first lets three read timeouts pass,
    ``/stream`` answers in two parts three read timeouts apart."""
    if scope["path"] == "/late":
        await asyncio.sleep(3 * READ_TIMEOUT)
    length, message = 0, {"more_body": True}
    while message.get("more_body"):
        message = await receive()
        RECEIVED.append(message["type"])
        if message["type"] == "http.disconnect":
            return
        length += len(message["body"])
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    if scope["path"] == "/stream":
        await send({"type": "http.response.body", "body": b"first", "more_body": True})
        await asyncio.sleep(3 * READ_TIMEOUT)
    await send({"type": "http.response.body", "body": str(length).encode()})


@asynccontextmanager
async def serving():
    """The protocol serving ``app`` on a free port (yields it), with a keep-alive timeout longer than its read timeout."""
    RECEIVED.clear()
    config = Config(app=app, http=RequestReadTimeoutProtocol, lifespan="off", log_config=None, timeout_keep_alive=5)
    config.load()
    state, loop = ServerState(), asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: RequestReadTimeoutProtocol(config=config, server_state=state, app_state={}, _loop=loop), "127.0.0.1", 0
    )
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        for protocol in list(state.connections):
            protocol.transport.close()
        await server.wait_closed()


async def read_until_closed(reader, limit: float) -> tuple[bytes, float]:
    """All the server sends until it closes the connection, and how long it took; fails past ``limit``."""
    started = time.monotonic()
    try:
        received = await asyncio.wait_for(reader.read(), limit)
    except TimeoutError:
        pytest.fail(f"the connection is still open after {limit} s")
    return received, time.monotonic() - started


def post(path: str, body: bytes, *, length: int | None = None) -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(body) if length is None else length}\r\n\r\n"
    )
    return head.encode() + body


@pytest.mark.parametrize("sent", [b"", b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n"], ids=["nothing", "headers-unfinished"])
def test_a_connection_whose_request_headers_stall_is_closed_unanswered_after_the_read_timeout(sent):
    async def stall():
        async with serving() as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(sent)
            return await read_until_closed(reader, READ_TIMEOUT + LATE)

    received, closed_in = asyncio.run(stall())

    assert received == b"" and READ_TIMEOUT - EARLY <= closed_in < READ_TIMEOUT + LATE, (received, closed_in)
    assert RECEIVED == []


def test_an_empty_line_after_an_answer_is_the_next_request_begun_not_keep_alive_idle():
    """The parser skips empty lines before a request without starting one, but uvicorn cancels its
    keep-alive timer on any byte: the connection stayed open, timed by nothing."""

    async def stall():
        async with serving() as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            await reader.readuntil(b"\r\n0\r\n\r\n")
            writer.write(b"\r\n")
            return await read_until_closed(reader, READ_TIMEOUT + LATE)

    received, closed_in = asyncio.run(stall())

    assert received == b"" and READ_TIMEOUT - EARLY <= closed_in < READ_TIMEOUT + LATE, (received, closed_in)


def test_a_stalled_body_is_answered_408_in_the_error_shape_and_its_request_ends():
    path = "/api/v1/jobs/trigger"

    async def stall():
        async with serving() as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(post(path, b'{"queue": "q', length=100))
            received, closed_in = await read_until_closed(reader, READ_TIMEOUT + LATE)
            await asyncio.sleep(0.05)  # the request's task reads the disconnect
            return received, closed_in

    received, closed_in = asyncio.run(stall())

    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 Request Timeout\r\n") and b"\r\nconnection: close" in head, head
    assert error_problem(path, 408, "application/json", body) is None
    assert json.loads(body)["code"] == "request_timeout"
    assert READ_TIMEOUT - EARLY <= closed_in < READ_TIMEOUT + LATE, closed_in
    assert RECEIVED == ["http.request", "http.disconnect"]


def test_every_byte_received_restarts_the_read_timer():
    request = post("/", b"x" * 8)

    async def trickle():
        async with serving() as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            started = time.monotonic()
            for index in range(0, len(request), 6):  # headers and body, a few bytes at a time
                writer.write(request[index : index + 6])
                await asyncio.sleep(READ_TIMEOUT / 2)
            answer = await reader.readuntil(b"\r\n0\r\n\r\n")
            return answer, time.monotonic() - started

    answer, took = asyncio.run(trickle())

    assert took > 5 * READ_TIMEOUT
    assert answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b"\r\n1\r\n8\r\n0\r\n\r\n"), answer


@pytest.mark.parametrize(
    "request_bytes, between, answered",
    [
        # An answer in progress: its request is whole, and the client, silent, only reads.
        (b"GET /stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 0, b"\r\n5\r\nfirst\r\n1\r\n0\r\n"),
        # A body sent at once, but read late: past its first 64 KiB the server stops reading it.
        (post("/late", b"x" * 1_000_000), 0, b"\r\n7\r\n1000000\r\n"),
        # Idle between requests: the keep-alive timeout's (5 s here).
        (b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 3 * READ_TIMEOUT, b"\r\n1\r\n0\r\n"),
    ],
    ids=["answer-in-progress", "body-read-late", "keep-alive"],
)
def test_no_read_timer_runs_while_the_server_is_the_one_waiting(request_bytes, between, answered):
    async def exchange_twice():
        async with serving() as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            answers = []
            for _ in range(2):
                writer.write(request_bytes)
                answers.append(await asyncio.wait_for(reader.readuntil(b"\r\n0\r\n\r\n"), 10))
                await asyncio.sleep(between)
            return answers

    answers = asyncio.run(exchange_twice())

    assert all(answer.startswith(b"HTTP/1.1 200 ") and answered in answer for answer in answers), answers
