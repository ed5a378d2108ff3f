"""The real web server (gunicorn with uvicorn workers, as deployed) around tests that need one."""

import http.client
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from pipeline_project.db.connections import connection_params
from tests.db_helpers import subprocess_database_env
from tests.helpers import free_port, unprivileged_user

ROOT = Path(__file__).resolve().parents[2]
# Fast clocks, as tests/jobs/conftest.py uses for in-process workers.
FAST_ENV = {
    "DL_HEARTBEAT_SEC": "0.2",
    "DL_REAPER_PERIOD_SEC": "0.2",
    "DL_RETRY_BACKOFF_SEC": "0.05",
    "DL_SHUTDOWN_TIMEOUT_SEC": "5",
    "LOG_LEVEL": "INFO",
    "PYTHONUNBUFFERED": "1",
}
GUNICORN = str(Path(sys.executable).parent / "gunicorn")


# The deployed command (ASGI: uvicorn workers), or the WSGI app under gunicorn's own workers.
ASGI_COMMAND = [GUNICORN, "-c", "pipeline_project/gunicorn_conf.py", "pipeline_project.asgi:application"]
WSGI_COMMAND = [GUNICORN, "-c", "pipeline_project/gunicorn_conf.py", "-k", "sync", "pipeline_project.wsgi:application"]

# The test handlers' tasks are this deployment's: the web's triggers take them (as its workers run them).
TEST_HANDLERS = {"JOBS_HANDLER_MODULES": "tests.jobs.handlers"}


@contextmanager
def web_server(*, workers: int = 1, env: dict | None = None, command: list[str] = ASGI_COMMAND):
    """Serve the project on a free port; yields ``(port, process)``. Stopped with SIGTERM on exit."""
    port = free_port()
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        env={
            **os.environ,
            **subprocess_database_env(),
            "WEB_BIND": f"127.0.0.1:{port}",
            "WEB_WORKERS": str(workers),
            "LOG_LEVEL": "WARNING",
            **TEST_HANDLERS,
            **(env or {}),
        },
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not answers(port):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"the web server did not start: {process.stderr.read() if process.poll() is not None else 'timeout'}"
                )
            time.sleep(0.1)
        yield port, process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def answers(port: int) -> bool:
    """Whether a web server on ``port`` answers /health."""
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
        connection.request("GET", "/health")
        return connection.getresponse().status == 200
    except OSError:
        return False


def worker_pids(server: subprocess.Popen) -> list[int]:
    """The gunicorn workers of a master process."""
    children = Path(f"/proc/{server.pid}/task/{server.pid}/children").read_text().split()
    return [int(pid) for pid in children]


def thread_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def established_connections(pid: int, port: int) -> int:
    """How many TCP connections to ``port`` (on this machine's loopback) process ``pid`` holds."""
    inodes = set()
    for name in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{name}").read_text().splitlines()[1:]:
            fields = line.split()
            local_port, state, inode = int(fields[1].rsplit(":", 1)[1], 16), fields[3], fields[9]
            if local_port == port and state == "01":  # ESTABLISHED
                inodes.add(f"socket:[{inode}]")
    held = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            held += os.readlink(fd) in inodes
        except OSError:  # closed meanwhile
            continue
    return held


# --- the service as the image starts it -----------------------------------------------------------

ENTRYPOINT = ["sh", str(ROOT / "docker-entrypoint.sh")]


@dataclass(frozen=True)
class Account:
    """Who the shipped processes run as: root, or an unprivileged user (``popen``: Popen's
    ``user``, ``group`` and ``extra_groups``, empty when it is the tests' own user)."""

    name: str
    uid: int
    popen: dict


def account(kind: str) -> Account:
    """Root (only when the tests run as root), or an unprivileged user: the tests' own, or (as
    root) the one that may reach the database server (``tests.helpers.unprivileged_user``)."""
    if kind == "root":
        if os.geteuid() != 0:
            pytest.skip("the tests run as an ordinary user: the service cannot be started as root")
        return Account("root", 0, {})
    if os.geteuid() != 0:
        return Account(pwd.getpwuid(os.geteuid()).pw_name, os.geteuid(), {})
    entry = pwd.getpwnam(unprivileged_user(connection_params("default").get("host")))
    reachable_by_others(Path(sys.executable).resolve())
    return Account(entry.pw_name, entry.pw_uid, {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []})


def reachable_by_others(path: Path) -> None:
    """Let every user traverse (not list) the directories above ``path``, as the embedded server
    and the engine do for their data directories: the interpreter may live under /root."""
    for parent in path.parents:
        mode = parent.stat().st_mode
        if not mode & stat.S_IXOTH:
            parent.chmod(mode | stat.S_IXOTH)


@dataclass
class Shipped:
    """The web server and a worker started by docker-entrypoint.sh; their logs are files in ``home``."""

    url: str
    home: Path
    web: subprocess.Popen
    worker: subprocess.Popen

    def logged(self) -> str:
        return "".join(path.read_text(errors="replace") for path in sorted(self.home.glob("*.log")))


@contextmanager
def shipped(account: Account, *, worker_args: list[str], env: dict | None = None):
    """``docker-entrypoint.sh web`` (gunicorn, the project's uvicorn worker, uvloop), then, once it
    answers, ``docker-entrypoint.sh worker ...``, as ``account``, with a home of their own (HOME,
    the metrics directory the web role clears, the engine's state store); stopped with SIGTERM on
    leaving, and neither may have logged an error or a traceback."""
    home = Path(tempfile.mkdtemp(prefix="shipped-", dir="/tmp"))
    os.chown(home, account.uid, -1)
    port = free_port()
    environment = {
        **os.environ,
        **FAST_ENV,
        **subprocess_database_env(),
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(home),
        "SECRET_KEY": "e2e-shipped-" + "x" * 40,
        "PROMETHEUS_MULTIPROC_DIR": str(home / "metrics"),
        "WEB_BIND": f"127.0.0.1:{port}",
        "WEB_WORKERS": "1",
        "LOG_LEVEL": "WARNING",
        "PYTHONDONTWRITEBYTECODE": "1",
        **TEST_HANDLERS,
        # The engine's store and scripts: the image's volume is the service user's, as this is.
        "SQLRS_STATE_STORE": str(home / "state"),
        "SQLRS_SCRIPT_ROOTS": str(home),
        **(env or {}),
    }
    processes: list[subprocess.Popen] = []

    def start(role: str, args: list[str]) -> subprocess.Popen:
        with (home / f"{role}.log").open("w") as log:
            os.chown(log.name, account.uid, -1)
            processes.append(
                subprocess.Popen(
                    [*ENTRYPOINT, role, *args],
                    cwd=ROOT,
                    env=environment,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    **account.popen,
                )
            )
        return processes[-1]

    try:
        web = start("web", [])
        deadline = time.monotonic() + 60
        while not answers(port):
            if web.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the shipped web server did not start:\n{(home / 'web.log').read_text()}")
            time.sleep(0.1)
        service = Shipped(f"http://127.0.0.1:{port}", home, web, start("worker", worker_args))
        yield service
        for process in processes:
            process.send_signal(signal.SIGTERM)
        assert [process.wait(timeout=30) for process in processes] == [0, 0], service.logged()
        logged = service.logged()
        assert '"ERROR"' not in logged and "Traceback" not in logged, logged[-5000:]
    finally:
        for process in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        shutil.rmtree(home, ignore_errors=True)
