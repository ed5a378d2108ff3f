"""The real web server (gunicorn with uvicorn workers, as deployed) around tests that need one."""

import http.client
import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from tests.db_helpers import subprocess_database_env
from tests.helpers import free_port

ROOT = Path(__file__).resolve().parents[2]
GUNICORN = str(Path(sys.executable).parent / "gunicorn")


# The deployed command (ASGI: uvicorn workers), or the WSGI app under gunicorn's own workers.
ASGI_COMMAND = [GUNICORN, "-c", "pipeline_project/gunicorn_conf.py", "pipeline_project.asgi:application"]
WSGI_COMMAND = [GUNICORN, "-c", "pipeline_project/gunicorn_conf.py", "-k", "sync", "pipeline_project.wsgi:application"]


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
