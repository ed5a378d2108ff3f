"""The web server as deployed (gunicorn, uvicorn workers, ASGI): idle followers hold nothing,
bodies are read however they are sent, and bounded: a huge declared length is answered at once,
unread (under WSGI too); the routes that reach the databases do so directly and through PgBouncer."""

import asyncio
import http.client
import itertools
import json
import os
import signal
import socket
import statistics
import subprocess
import time

import psycopg
import pytest

from jobs.processes import services as processes
from jobs.processes.models import Task
from pipeline_project.db.connections import connection_params
from pipeline_project.web.waiting import POOL_MAX_SIZE
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.core.helpers import error_problem, missing_security_headers
from tests.core.sweep import BODY_METHODS, METHODS, converter_value, json_routes
from tests.db_helpers import subprocess_database_env
from tests.e2e.servers import (
    ASGI_COMMAND,
    ROOT,
    WSGI_COMMAND,
    answers,
    established_connections,
    thread_count,
    web_server,
    worker_pids,
)
from tests.helpers import every_scope_token, wait_for
from tests.jobs.conftest import enqueue
from tests.jobs.processes import processors  # noqa: F401 (registers the namespaces the web server serves)

pytestmark = ALL_DATABASES_COMMITTED

FOLLOWERS = 200
WEB_THREADS = 4
CALLERS = 60


def timed(port: int, method: str, path: str, *, token: str, body: dict | None = None, rounds: int = 30) -> dict:
    """``rounds`` requests on one keep-alive connection: p50 and p95 in ms (each must succeed)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    durations = []
    for index in range(rounds):
        payload = (
            json.dumps({**body, "lock_key": f"{body['lock_key']}-{index}-{time.monotonic_ns()}"}) if body else None
        )
        started = time.perf_counter()
        connection.request(
            method, path, body=payload, headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        )
        response = connection.getresponse()
        response.read()
        durations.append((time.perf_counter() - started) * 1000)
        assert response.status < 300, (path, response.status)
    return {"p50": statistics.median(durations), "p95": statistics.quantiles(durations, n=20)[18]}


def steadiest(measure, *, rounds: int = 3) -> dict:
    """The round of ``measure()`` with the lowest p95: a test beside this one on the same cores
    delays a few requests of one round; what the server itself does slows every round."""
    return min((measure() for _ in range(rounds)), key=lambda figures: figures["p95"])


async def follow(port: int, path: str, token: str, opened: list) -> None:
    """One follower: open the stream, read its first event, then wait for more (until canceled)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    opened.append(writer)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\r\n".encode())
    await writer.drain()
    received = b""
    while b'"queued"' not in received:
        chunk = await reader.read(4096)
        assert chunk, f"the stream closed early: {received[:300]!r}"
        received += chunk
    assert received.startswith(b"HTTP/1.1 200")


def database_connections(dbname: str) -> int:
    with psycopg.connect(**connection_params(), autocommit=True) as conn:
        return conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()", [dbname]
        ).fetchone()[0]


def test_clients_connecting_at_once_are_spread_over_the_workers():
    """On one shared listening socket the first worker to wake took all 16 connections."""
    with web_server(workers=2) as (port, server):
        workers = worker_pids(server)

        async def connect_at_once() -> list[int]:
            connections = await asyncio.gather(*(asyncio.open_connection("127.0.0.1", port) for _ in range(16)))
            for reader, writer in connections:  # answered: each is accepted by now
                writer.write(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                await reader.readuntil(b"\r\n\r\n")
            held = [established_connections(pid, port) for pid in workers]
            for _reader, writer in connections:
                writer.close()
            return held

        spreads = [asyncio.run(connect_at_once()) for _ in range(5)]

    print(f"\nconnections per worker, 5 times 16 at once: {spreads}")  # noqa: T201 - reports the figures
    assert all(sum(held) == 16 for held in spreads)
    # The kernel hashes connections over the sockets: roughly half each, never all on one.
    assert min(sum(column) for column in zip(*spreads, strict=True)) >= 24
    assert all(min(held) >= 1 for held in spreads)


def test_a_second_server_on_a_taken_port_refuses_to_start():
    """Workers listen with SO_REUSEPORT: without the check a second server would share the port."""
    with web_server() as (port, server):
        second = subprocess.run(
            ASGI_COMMAND,
            check=False,
            cwd=ROOT,
            env={**os.environ, **subprocess_database_env(), "WEB_BIND": f"127.0.0.1:{port}"},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert answers(port) and server.poll() is None  # the first one serves on

    assert second.returncode != 0
    assert f"Cannot listen on 127.0.0.1:{port}: Address already in use" in second.stderr


def test_sigterm_ends_open_event_streams_cleanly_and_the_server_exits_0_at_once():
    """A stream follows for as long as its client likes: the stop waited gunicorn's whole graceful
    timeout for it, then cut it, beyond a container runtime's default stop timeout (exit 137)."""
    token = every_scope_token("stopping")
    job_id = enqueue(task="never.runs").job_id  # no worker: its stream stays open
    request = f"GET /api/v1/jobs/{job_id}/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\r\n"
    with web_server(workers=2) as (port, server):

        async def open_stream():
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(request.encode())
            await reader.readuntil(b'"queued"')
            return reader, writer  # the writer kept: a collected one closes the connection

        async def stop_and_read_to_the_end():
            streams = await asyncio.gather(*(open_stream() for _ in range(4)))
            started = time.monotonic()
            server.send_signal(signal.SIGTERM)
            endings = await asyncio.wait_for(asyncio.gather(*(reader.read() for reader, _ in streams)), 10)
            return endings, time.monotonic() - started

        endings, took = asyncio.run(stop_and_read_to_the_end())
        code = server.wait(timeout=10)

    assert code == 0 and took < 3, (code, took)
    assert all(ending.endswith(b"0\r\n\r\n") for ending in endings), endings  # the chunked end: not cut


def test_sixty_waiting_process_calls_hold_no_thread_and_no_connection_each(tmp_path):
    """No worker serves the namespace, so every call waits (up to its step timeout) on the event
    loop; meanwhile the web worker keeps its pool of threads and connections."""
    token = every_scope_token("callers")
    for n in range(CALLERS):
        processes.process_put(namespace="test.scripted", process_id=f"waiting-{n}", process={})
    dbname = connection_params()["dbname"]
    server_env = {
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path),
        "PROCESSES_HANDLER_MODULES": "tests.jobs.processes.processors",
        "WEB_THREADS": str(WEB_THREADS),
    }
    with web_server(workers=1, env=server_env) as (port, server):
        [worker] = worker_pids(server)
        timed(port, "GET", "/api/v1/processes/test.scripted/waiting-0", token=token)  # hub and pools exist
        before = {"threads": thread_count(worker), "connections": database_connections(dbname)}

        async def call(n: int, opened: list) -> None:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            opened.append(writer)
            body = b'{"args": {}}'
            writer.write(
                f"POST /api/v1/processes/test.scripted/waiting-{n}/call HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            await writer.drain()
            await reader.read(1)  # no answer comes before the step timeout

        async def with_callers():
            opened: list = []
            calls = [asyncio.create_task(call(n, opened)) for n in range(CALLERS)]
            await asyncio.sleep(1.5)  # every call is in the schedule and waiting
            during = {"threads": thread_count(worker), "connections": database_connections(dbname)}
            for task in calls:
                task.cancel()
            for writer in opened:
                writer.close()
            return during

        during = asyncio.run(with_callers())
        tasks = Task.objects.filter(process__process_id__startswith="waiting-", task_type="call").count()

    print(f"\n{CALLERS} waiting calls: before {before}, during {during}, tasks scheduled {tasks}")  # noqa: T201 - reports the figures
    assert tasks == CALLERS  # they all got as far as waiting
    assert during["threads"] <= before["threads"] + WEB_THREADS
    assert during["connections"] <= before["connections"] + WEB_THREADS + POOL_MAX_SIZE + 1


def test_two_hundred_followers_hold_no_threads_and_the_server_keeps_answering(tmp_path):
    token = every_scope_token("load")
    job_id = enqueue(task="never.runs").job_id  # no worker: the job never finishes
    events = f"/api/v1/jobs/{job_id}/events"
    trigger = {"queue": "web-test", "task": "jobs.noop", "lock_key": "k"}
    dbname = connection_params()["dbname"]

    server_env = {
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path),
        "DB_POOL_SIZE": "10",
        "DB_POOL_MAX_IDLE_SEC": "1",
        "WEB_THREADS": str(WEB_THREADS),
    }
    with web_server(workers=1, env=server_env) as (port, server):
        [worker] = worker_pids(server)

        async def followers(count: int):
            opened: list = []
            await asyncio.gather(*(follow(port, events, token, opened) for _ in range(count)))
            return opened

        async def warm_up():
            for writer in await followers(1):
                writer.close()

        asyncio.run(warm_up())  # the process's hub and pool exist from here on
        time.sleep(0.5)
        before = {
            "health": steadiest(lambda: timed(port, "GET", "/health", token=token)),
            "trigger": steadiest(lambda: timed(port, "POST", "/api/v1/jobs/trigger", token=token, body=trigger)),
            "threads": thread_count(worker),
            "connections": database_connections(dbname),
        }

        async def with_followers():
            opened = await followers(FOLLOWERS)
            loop = asyncio.get_running_loop()
            during = {
                "health": await loop.run_in_executor(
                    None, lambda: steadiest(lambda: timed(port, "GET", "/health", token=token))
                ),
                "trigger": await loop.run_in_executor(
                    None,
                    lambda: steadiest(lambda: timed(port, "POST", "/api/v1/jobs/trigger", token=token, body=trigger)),
                ),
                "threads": thread_count(worker),
                "connections": database_connections(dbname),
            }
            for writer in opened:
                writer.close()
            return during

        during = asyncio.run(with_followers())
        # The burst of 200 requests filled the connection pool; it shrinks back once they idle.
        wait_for(lambda: database_connections(dbname) <= before["connections"] + 1, timeout=60, what="connections")
        after = {"threads": thread_count(worker), "connections": database_connections(dbname)}
        metrics = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        wait_for(lambda: _open_streams(metrics, token) == 0.0, timeout=20, what="open streams to drop to 0")

    print(f"\n{FOLLOWERS} followers: before {before}\n during {during}\n after {after}")  # noqa: T201 - reports the figures
    # Not one per follower: at most the worker's pool of threads for synchronous views, whoever follows.
    assert during["threads"] <= before["threads"] + WEB_THREADS
    assert after["threads"] <= before["threads"] + WEB_THREADS
    # At most the pools' sizes (the web pool, the async pool) and a LISTEN, however many follow.
    assert during["connections"] <= before["connections"] + 10 + POOL_MAX_SIZE + 1
    assert during["health"]["p95"] <= max(3 * before["health"]["p95"], before["health"]["p95"] + 50)
    assert during["trigger"]["p95"] <= max(3 * before["trigger"]["p95"], before["trigger"]["p95"] + 100)


def _open_streams(connection: http.client.HTTPConnection, token: str) -> float:
    connection.request("GET", "/metrics", headers={"Authorization": f"Bearer {token}"})
    text = connection.getresponse().read().decode()
    line = next((line for line in text.splitlines() if line.startswith("http_event_streams_open{")), None)
    return float(line.rsplit(" ", 1)[1]) if line else 0.0


def test_a_chunked_body_is_read_and_an_oversized_one_refused(settings, route):
    token = every_scope_token("chunks")
    body = json.dumps({"queue": "q", "task": "jobs.noop", "lock_key": "chunked"}).encode()

    with web_server(env=route.env) as (port, _server):
        accepted = _chunked_post(port, token, [body[:10], body[10:]])
        refused = _chunked_post(port, token, [b"x" * 1024 * 1024] * 6)  # 6 MiB > MAX_REQUEST_BODY_BYTES

    assert accepted[0] == 201 and json.loads(accepted[1])["created"] is True
    assert refused[0] == 413 and json.loads(refused[1])["code"] == "request_too_large"


def _chunked_post(port: int, token: str, chunks: list[bytes]) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.putrequest("POST", "/api/v1/jobs/trigger")
    connection.putheader("Authorization", f"Bearer {token}")
    connection.putheader("Content-Type", "application/json")
    connection.putheader("Transfer-Encoding", "chunked")
    connection.endheaders()
    try:
        for chunk in chunks:
            connection.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        connection.send(b"0\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server answered and closed before the rest arrived
    response = connection.getresponse()
    return response.status, response.read()


def _closed_by_server(client: socket.socket) -> bool:
    """Whether the server closed the connection: an end of stream, or a reset (a server closing
    with the client's unread bytes in its buffer resets the connection instead)."""
    try:
        return client.recv(1) == b""
    except ConnectionResetError:
        return True


@pytest.mark.parametrize("command", [ASGI_COMMAND, WSGI_COMMAND], ids=["asgi", "wsgi"])
@pytest.mark.parametrize("path", ["/api/v1/jobs/trigger", "/sqlrs/v1/prepare-jobs"])
def test_a_huge_declared_length_gets_413_at_once_without_its_body(command, path):
    with web_server(command=command) as (port, _server):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
            client.sendall(
                f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                "Content-Length: 1000000000000\r\n\r\n".encode()
            )
            client.sendall(b'{"queue": "q", ')  # a few bytes of the trillion it declared, and no more
            started = time.monotonic()
            status, headers, body = _read_response(client)
            answered_in = time.monotonic() - started
            closed = _closed_by_server(client)  # the server does not wait for the rest of the body
        assert answers(port)  # and goes on serving

    assert status == 413 and answered_in < 1, (status, answered_in)
    assert error_problem(path, status, headers.get("content-type", ""), body) is None
    assert json.loads(body)["code"] == "request_too_large"
    assert not missing_security_headers(headers)
    assert closed


def test_a_huge_body_announced_with_expect_100_continue_is_refused_without_inviting_it():
    with web_server() as (port, _server), socket.create_connection(("127.0.0.1", port), timeout=10) as client:
        client.sendall(
            b"POST /api/v1/jobs/trigger HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Expect: 100-continue\r\nContent-Length: 1000000000000\r\n\r\n"
        )
        status, headers, body = _read_response(client)  # the first answer: not "100 Continue"

    assert status == 413 and json.loads(body)["code"] == "request_too_large"
    assert headers["connection"] == "close"


def _read_response(client: socket.socket) -> tuple[int, dict, bytes]:
    """One HTTP/1.1 response with a Content-Length, read from a raw socket: status, headers, body."""
    received = b""
    while b"\r\n\r\n" not in received:
        chunk = client.recv(65536)
        assert chunk, f"the connection closed before an answer: {received!r}"
        received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {name.strip().lower(): value.strip() for name, value in (line.split(":", 1) for line in lines)}
    while len(body) < int(headers["content-length"]):
        chunk = client.recv(65536)
        assert chunk, "the connection closed in the middle of the answer"
        body += chunk
    return int(status_line.split()[1]), headers, body


def test_every_route_answers_every_method_in_its_error_shape_under_the_deployed_server(route):
    """The sweep's first pass (tests/core/test_api_sweep.py goes deeper, in-process), through the
    ASGI stack as deployed: every route, every method, a malformed body, with and without a token;
    with the databases reached directly and through PgBouncer."""
    token = every_scope_token("sweep")
    problems, requests = [], 0
    with web_server(env=route.env) as (port, _server):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        for route in json_routes():
            path = route.path({name: converter_value(kind) for name, kind in route.parameters})
            for method, auth in itertools.product(METHODS, ({"Authorization": f"Bearer {token}"}, {})):
                headers = {"Content-Type": "application/json", **auth}
                connection.request(
                    method, path, body=b'{"queue": ' if method in BODY_METHODS else None, headers=headers
                )
                response = connection.getresponse()
                body = response.read()
                requests += 1
                status, content_type = response.status, response.getheader("Content-Type", "")
                if status >= 500 or 300 <= status < 400:
                    problems.append(f"{method} {path}: {status} {body[:200]!r}")
                elif (
                    status >= 400 and method != "HEAD" and (problem := error_problem(path, status, content_type, body))
                ):
                    problems.append(f"{method} {path} ({'token' if auth else 'anonymous'}): {problem}")
                elif content_type.startswith("text/html") and not route.view.endswith("DocsView"):
                    problems.append(f"{method} {path}: {status} answered HTML")
                if response.getheader("Connection", "").lower() == "close":
                    connection.close()

    assert requests == len(json_routes()) * len(METHODS) * 2
    assert not problems, "\n".join(problems)
