"""Shared plumbing for the benchmarks: scratch databases, a real gunicorn, an HTTP client.

Benchmarks run against fresh ``bench_control`` / ``bench_pipeline`` databases on the
server the project is configured for (the embedded PostgreSQL unless DATABASE_URL is
set), so they never touch development data.
"""

import asyncio
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import django
import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pipeline_project.settings")

from pipeline_project.db.connections import connection_params  # noqa: E402 - importable once ROOT is on sys.path
from pipeline_project.db.urls import database_url  # noqa: E402 - importable once ROOT is on sys.path

PYTHON = sys.executable
# A prefix of its own lets two benchmarks share one server without dropping each other's databases.
BENCH_PREFIX = os.environ.get("BENCH_DB_PREFIX", "bench")
BENCH_DATABASES = {"default": f"{BENCH_PREFIX}_control", "pipeline": f"{BENCH_PREFIX}_pipeline"}


def server_params() -> dict:
    """psycopg parameters of the configured server (its maintenance database)."""
    django.setup()
    params = connection_params("default")
    params["dbname"] = "postgres"
    return {key: params[key] for key in ("host", "port", "user", "password", "dbname") if params.get(key)}


def create_bench_databases(params: dict) -> dict:
    """Drop and recreate the bench databases, migrate them; return the env that selects them."""
    with psycopg.connect(**params, autocommit=True) as conn:
        for name in BENCH_DATABASES.values():
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    env = bench_env(params)
    migrate_bench_databases(env)
    return env


def bench_env(params: dict, databases: dict[str, str] = BENCH_DATABASES) -> dict:
    """The environment that points a process (manage.py, a server) at the bench databases (or
    those ``databases`` names per alias)."""
    return {
        **os.environ,
        "DATABASE_URL": database_url({**params, "dbname": databases["default"]}),
        "PIPELINE_DATABASE_URL": database_url({**params, "dbname": databases["pipeline"]}),
        "LOG_LEVEL": "WARNING",
        # Benchmarks serve no static files, so there is no collectstatic output to find.
        "PYTHONWARNINGS": "ignore:No directory at",
    }


def migrate_bench_databases(env: dict) -> None:
    for alias in BENCH_DATABASES:
        manage(env, "migrate", "--noinput", "--database", alias)


def use_bench_databases() -> None:
    """Point this process's Django (set up by server_params) at the bench databases."""
    from django.db import connections

    for alias, name in BENCH_DATABASES.items():
        connections[alias].close()
        connections.settings[alias]["NAME"] = name


def drop_bench_databases(params: dict) -> None:
    with psycopg.connect(**params, autocommit=True) as conn:
        for name in BENCH_DATABASES.values():
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def bench_connection(params: dict, alias: str, **kwargs) -> psycopg.Connection:
    return psycopg.connect(**{**params, "dbname": BENCH_DATABASES[alias]}, **kwargs)


def manage(env: dict, *args: str, code: Path = ROOT) -> str:
    """``manage.py`` of the checkout at ``code`` (this one unless told), its output."""
    result = subprocess.run([PYTHON, "manage.py", *args], cwd=code, env=env, check=True, capture_output=True, text=True)
    return result.stdout


def stop(process: subprocess.Popen, timeout: float = 60) -> int:
    """SIGTERM a process (if still running) and wait for it; SIGKILL it after ``timeout``. Its exit status."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


SERVER_PIDS: dict[int, int] = {}  # port → pid of the gunicorn serving it (see cpu_seconds)


def proc_stat(pid: int) -> list[str]:
    """/proc/<pid>/stat's fields after the command name (which may hold spaces): state first."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a process and its children (a server's workers) have used so far."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    pids = [pid]
    while pids:
        current = pids.pop()
        try:
            fields = proc_stat(current)
            total += (int(fields[11]) + int(fields[12])) / ticks
            for task in Path(f"/proc/{current}/task").iterdir():
                pids.extend(int(child) for child in (task / "children").read_text().split())
        except FileNotFoundError:  # it ended meanwhile
            continue
    return total


@contextmanager
def gunicorn(
    env: dict, *, workers: int = 2, app: str = "pipeline_project.asgi:application", options=(), probe="/health"
):
    """A real web server on a free port, as `make run` starts it (gunicorn, uvicorn workers, ASGI)
    unless ``app`` and ``options`` (gunicorn's, after the project's config) say otherwise."""
    port = free_port()
    process = subprocess.Popen(
        [
            str(Path(PYTHON).parent / "gunicorn"),
            "-c",
            "pipeline_project/gunicorn_conf.py",
            app,
            "--log-level",
            "warning",
            *options,
        ],
        cwd=ROOT,
        env={**env, "WEB_BIND": f"127.0.0.1:{port}", "WEB_WORKERS": str(workers)},
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"gunicorn exited with {process.returncode}")
            try:
                client = HttpClient(port, token="")
                if client.request("GET", probe)[0] < 500:
                    break
            except OSError:
                time.sleep(0.1)
        else:
            raise RuntimeError("gunicorn did not start")
        SERVER_PIDS[port] = process.pid
        yield port
    finally:
        process.terminate()
        process.wait(timeout=30)


class Background:
    """A thread that runs ``_run`` while a ``with`` block runs; ``_run`` ends once ``_stop`` is set."""

    def __init__(self):
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        raise NotImplementedError


class HttpClient:
    """A keep-alive JSON client (one TCP connection, like a daemon would hold)."""

    def __init__(self, port: int, token: str):
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def request(self, method: str, path: str, body=None) -> tuple[int, dict]:
        payload = json.dumps(body) if body is not None else None
        self.connection.request(method, path, body=payload, headers=self.headers)
        response = self.connection.getresponse()
        data = response.read()
        return response.status, (json.loads(data) if data else {})


def encode_request(method: str, path: str, body, token: str) -> bytes:
    payload = json.dumps(body).encode() if body is not None else b""
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
    )
    return head.encode() + payload


async def read_response(reader: asyncio.StreamReader) -> int:
    """One response off a keep-alive connection; its status."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:])}
    if "content-length" in headers:
        await reader.readexactly(int(headers["content-length"]))
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
            await reader.readexactly(size + 2)
        await reader.readuntil(b"\r\n")
    return status


async def keep_alive_load(
    port: int, next_request, token: str, *, clients: int, seconds: float | None = None, requests: int | None = None
) -> tuple[float, dict[int, int], list[float]]:
    """``clients`` keep-alive connections from one asyncio loop with raw sockets (the client costs
    little beside the server it measures), each sending ``next_request()`` (method, path, JSON
    body) one at a time, for ``seconds`` or until ``requests`` have been sent: requests/s of 2xx
    answers, every status's count, and each request's latency (ms)."""
    statuses: dict[int, int] = {}
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds if seconds is not None else float("inf")
    left = requests if requests is not None else float("inf")

    async def client():
        nonlocal left
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while left > 0 and time.perf_counter() < deadline:
                left -= 1
                started = time.perf_counter()
                writer.write(encode_request(*next_request(), token))
                status = await read_response(reader)
                latencies.append((time.perf_counter() - started) * 1000)
                statuses[status] = statuses.get(status, 0) + 1
        finally:
            writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    elapsed = time.perf_counter() - started
    return sum(count for status, count in statuses.items() if 200 <= status < 300) / elapsed, statuses, latencies


def timed(call, count: int) -> list[float]:
    """Call ``call()`` ``count`` times; return each duration in milliseconds."""
    durations = []
    for _ in range(count):
        started = time.perf_counter()
        call()
        durations.append((time.perf_counter() - started) * 1000)
    return durations


def percentiles(durations: list[float]) -> dict:
    ordered = sorted(durations)
    return {
        "p50_ms": round(statistics.median(ordered), 2),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 2),
        "n": len(ordered),
    }


def print_table(title: str, rows: list[tuple]) -> None:
    print(f"\n{title}")
    width = max(len(str(row[0])) for row in rows)
    for label, *values in rows:
        print(f"  {label:<{width}}  " + "  ".join(str(value) for value in values))
