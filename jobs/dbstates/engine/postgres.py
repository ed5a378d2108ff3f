"""The local runtime: PostgreSQL servers on this machine in place of sqlrs's Docker containers.

A server runs from a data directory on a free loopback port, with its Unix socket in the
data directory when the path is short enough, superuser ``sqlrs`` and trust authentication
for the socket and 127.0.0.1 only. As root (PostgreSQL refuses to run as root) servers run
as the system user ``SQLRS_OS_USER``, created on first use. Servers are throw-away: they run
with ``fsync=off``; a snapshot is synced when its marker is written (``statefs``).
"""

import contextlib
import logging
import os
import pwd
import queue
import signal
import socket
import stat
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psycopg
from django.conf import settings

from jobs.dbstates.engine import statefs
from jobs.runtime.subprocesses import child
from pipeline_project.system_users import system_user_ensure

log = logging.getLogger("pipeline.dbstates")

SUPERUSER = "sqlrs"
DATABASE = "postgres"
READY_POLL_SEC = 0.005
START_TIMEOUT_SEC = 60.0
STOP_TIMEOUT_SEC = 60.0
MAX_SOCKET_PATH = 100  # sun_path is 108 bytes on Linux
SERVER_OPTIONS = {
    "listen_addresses": "127.0.0.1",
    "fsync": "off",
    "full_page_writes": "off",
    "max_connections": "40",
    "shared_buffers": "32MB",
    "max_wal_size": "256MB",
    "logging_collector": "off",
}
_children: dict[int, tuple[subprocess.Popen, Path]] = {}  # servers this process started (and their
# data directories), reaped when they end
_children_lock = threading.Lock()


class ServerError(Exception):
    """A server could not be initialized, started or stopped; the message says why."""


@dataclass(frozen=True)
class Server:
    data_dir: Path
    port: int
    pid: int

    @property
    def dsn(self) -> str:
        return f"postgres://{SUPERUSER}@127.0.0.1:{self.port}/{DATABASE}"

    def connect(self, **kwargs) -> psycopg.Connection:
        return psycopg.connect(host="127.0.0.1", port=self.port, user=SUPERUSER, dbname=DATABASE, **kwargs)


def os_user() -> str | None:
    """The system user servers run as: None (this one) unless running as root."""
    if os.geteuid() != 0:
        return None
    name = settings.SQLRS_OS_USER
    system_user_ensure(name=name, useradd_options=("--system", "--no-create-home"))
    return name


def as_server_user() -> dict:
    """Popen keywords that run a program as the server user (its group too: as root's group,
    root-owned directories' group bits, not their "other" bits, would apply)."""
    user = os_user()
    if user is None:
        return {}
    entry = pwd.getpwnam(user)
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}


def own(path: Path) -> None:
    """Make ``path`` (a data directory, recursively) the server user's, reachable through its parents."""
    user = os_user()
    if user is None:
        return
    for parent in path.parents:  # o+x: the server user may traverse (not list) the parents
        mode = parent.stat().st_mode
        if not mode & stat.S_IXOTH:
            parent.chmod(mode | stat.S_IXOTH)
    if path.stat().st_uid == pwd.getpwnam(user).pw_uid:
        return  # a copy (cp -a, as root) of a directory the server user owns: its files are theirs too
    subprocess.run(["chown", "-R", f"{user}:", str(path)], check=True, capture_output=True)


def init_base(image, target: Path) -> None:
    """initdb into ``target`` (which must not exist)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    target.mkdir(mode=0o700)
    own(target)
    flags = ["--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"]
    _run_as_server_user([image.program("initdb"), "-D", str(target), "-U", SUPERUSER, *flags])


def _run_as_server_user(args: list[str]) -> None:
    try:
        subprocess.run(args, check=True, capture_output=True, text=True, timeout=300, **as_server_user())
    except subprocess.CalledProcessError as exc:
        raise ServerError(f"{Path(args[0]).name} failed: {(exc.stderr or exc.stdout).strip()[-2000:]}") from None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def log_path(data_dir: Path) -> Path:
    return data_dir.with_name(data_dir.name + ".log")


def start(image, data_dir: Path, *, attempts: int = 3) -> Server:
    """Start a server on ``data_dir`` on a free port; return once it accepts connections."""
    for attempt in range(attempts):
        port = free_port()
        socket_dir = str(data_dir) if len(f"{data_dir}/.s.PGSQL.{port}") <= MAX_SOCKET_PATH else ""
        options = {**SERVER_OPTIONS, "port": str(port), "unix_socket_directories": socket_dir}
        args = [image.program("postgres"), "-D", str(data_dir)]
        for name, value in options.items():
            args += ["-c", f"{name}={value}"]
        with open(log_path(data_dir), "ab") as log_file:
            process = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C or a worker's death does not take its servers down
                **as_server_user(),
            )
        with _children_lock:
            _children[process.pid] = (process, data_dir)
        try:
            return _wait_ready(data_dir, process, port)
        except ServerError as exc:
            if ("could not bind" not in str(exc) and "already in use" not in str(exc)) or attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def _wait_ready(data_dir: Path, process: subprocess.Popen, port: int) -> Server:
    deadline = time.monotonic() + START_TIMEOUT_SEC
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ServerError(f"the server on {data_dir.name} exited at start: {_log_tail(data_dir)}")
        lines = _pid_file_lines(data_dir)
        if len(lines) >= 8 and lines[0] == str(process.pid) and lines[7].strip() == "ready":
            return Server(data_dir=data_dir, port=port, pid=process.pid)
        time.sleep(READY_POLL_SEC)
    process.kill()
    raise ServerError(f"the server on {data_dir.name} did not start within {START_TIMEOUT_SEC:.0f} s")


def _log_tail(data_dir: Path) -> str:
    try:
        return log_path(data_dir).read_text(errors="replace")[-1000:].strip()
    except FileNotFoundError:
        return "(no log)"


def _pid_file_lines(data_dir: Path) -> list[str]:
    try:
        return (data_dir / "postmaster.pid").read_text().splitlines()
    except (FileNotFoundError, PermissionError):
        return []


def is_alive(pid: int) -> bool:
    with _children_lock:
        child = _children.get(pid)
        if child is not None:
            if child[0].poll() is None:
                return True
            del _children[pid]
            return False
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def running(data_dir: Path) -> Server | None:
    """The server running on ``data_dir``, if one is (its pid file names a live postmaster)."""
    lines = _pid_file_lines(data_dir)
    if len(lines) < 4 or not lines[0].strip().isdigit():
        return None
    pid = int(lines[0])
    if not is_alive(pid) or not _is_postmaster_of(pid, data_dir):
        return None
    return Server(data_dir=data_dir, port=int(lines[3]), pid=pid)


def _is_postmaster_of(pid: int, data_dir: Path) -> bool:
    """Whether process ``pid`` is a ``postgres`` working in ``data_dir``, as its postmaster is: a
    dead server's pid file may name a live stranger (pids come round again, after 32,768 on many
    kernels)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            program = stat.read().partition("(")[2].rpartition(")")[0]
        return program == "postgres" and Path(os.readlink(f"/proc/{pid}/cwd")) == data_dir.resolve()
    except OSError:
        return False


def started() -> list[Path]:
    """The data directories of the servers this process started that still run."""
    with _children_lock:
        children = list(_children.values())
    return [data_dir for process, data_dir in children if process.poll() is None]


def stop(data_dir: Path, *, immediate: bool = False) -> bool:
    """Stop the server on ``data_dir`` (fast shutdown: a clean checkpoint; immediate: none).
    Returns whether one was running. A stale pid file (its server died) is removed."""
    server = running(data_dir)
    if server is None:
        (data_dir / "postmaster.pid").unlink(missing_ok=True)
        return False
    os.kill(server.pid, signal.SIGQUIT if immediate else signal.SIGINT)
    deadline = time.monotonic() + STOP_TIMEOUT_SEC
    while is_alive(server.pid):
        if time.monotonic() > deadline:
            os.kill(server.pid, signal.SIGKILL)
            deadline = time.monotonic() + STOP_TIMEOUT_SEC
        time.sleep(READY_POLL_SEC)
    (data_dir / "postmaster.pid").unlink(missing_ok=True)
    return True


def stop_all(data_dirs: list[Path], *, deadline: float) -> tuple[list[Path], list[Path]]:
    """Fast shutdowns of the servers on ``data_dirs``, side by side, waited for until ``deadline``
    (``time.monotonic()``); nothing is killed. Returns the directories whose servers stopped, and
    those whose servers still run then (their shutdown goes on)."""
    servers = [server for server in map(running, data_dirs) if server is not None]
    for server in servers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(server.pid, signal.SIGINT)
    waiting = list(servers)
    while waiting and time.monotonic() < deadline:
        waiting = [server for server in waiting if is_alive(server.pid)]
        if waiting:
            time.sleep(READY_POLL_SEC)
    waiting = [server for server in waiting if is_alive(server.pid)]
    return [server.data_dir for server in servers if server not in waiting], [server.data_dir for server in waiting]


def discard(data_dir: Path) -> None:
    """Stop the server on ``data_dir`` at once (if one runs) and remove the directory and its log."""
    stop(data_dir, immediate=True)
    statefs.remove(data_dir)
    log_path(data_dir).unlink(missing_ok=True)


def checkpoint(server: Server) -> None:
    with server.connect(autocommit=True) as conn:
        conn.execute("CHECKPOINT")


def client_sessions(server: Server) -> list[int]:
    """Pids of the client sessions connected to ``server`` (not this query's own)."""
    with server.connect(autocommit=True, connect_timeout=5) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
        ).fetchall()
    return [pid for (pid,) in rows]


def terminate_sessions(server: Server) -> None:
    with server.connect(autocommit=True, connect_timeout=5) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
        )


def client_env(server: Server) -> dict[str, str]:
    """The environment a client program connects to ``server`` with (no flag can override it)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    return {**env, "PGHOST": "127.0.0.1", "PGPORT": str(server.port), "PGUSER": SUPERUSER, "PGDATABASE": DATABASE}


def run_lines(
    args: list[str],
    *,
    env: dict[str, str],
    stdin: str | None,
    on_lines: Callable[[list[str]], None],
    cwd: str | None = None,
    stop: threading.Event,
    on_quiet: Callable[[float], None] | None = None,
    quiet_sec: float = 5.0,
    linger_sec: float = 0.05,
) -> int | None:
    """Run a client program, handing its output (stdout and stderr, merged) to ``on_lines`` in
    batches of lines (at most ``linger_sec`` old), and ``on_quiet(seconds running)`` after every
    ``quiet_sec`` without output. Killed as soon as ``stop`` is set (``jobs.runtime.subprocesses``):
    returns None."""
    with child(
        args,
        stop=stop,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=cwd,
    ) as running:
        lines: queue.Queue = queue.Queue()
        threads = [threading.Thread(target=_read_lines, args=(running.process.stdout, lines), daemon=True)]
        if stdin is not None:
            threads.append(threading.Thread(target=_write_input, args=(running.process.stdin, stdin), daemon=True))
        for thread in threads:
            thread.start()
        _hand_lines(lines, stop=stop, on_lines=on_lines, on_quiet=on_quiet, quiet_sec=quiet_sec, linger_sec=linger_sec)
        code = running.process.wait()
        for thread in threads:
            thread.join(timeout=5)
    return None if running.stopped else code


def _read_lines(stream, lines: queue.Queue) -> None:
    for raw in stream:
        lines.put(raw.decode("utf-8", errors="replace").rstrip("\n"))
    lines.put(None)


def _write_input(stream, text: str) -> None:
    try:
        stream.write(text.encode())
        stream.close()
    except (BrokenPipeError, OSError):
        pass


def _hand_lines(
    lines: queue.Queue, *, stop: threading.Event, on_lines, on_quiet, quiet_sec: float, linger_sec: float
) -> None:
    """Hand the lines read to ``on_lines`` in batches until the output ends or ``stop`` is set
    (a child the program left may hold its output open after it was killed)."""
    ended = False
    started = last_heard = time.monotonic()
    while not ended and not stop.is_set():
        batch = []
        try:
            line = lines.get(timeout=linger_sec)
            deadline = time.monotonic() + linger_sec
            while line is not None:
                batch.append(line)
                if time.monotonic() >= deadline or len(batch) >= 1000:
                    break
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            ended = line is None
        except queue.Empty:
            pass
        now = time.monotonic()
        if batch:
            on_lines(batch)
            last_heard = now
        elif on_quiet is not None and now - last_heard >= quiet_sec:
            on_quiet(now - started)
            last_heard = now
