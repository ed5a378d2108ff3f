"""A real PgBouncer in transaction mode in front of the test databases, and the environment that
runs the service behind it as deployed: both databases through the pooler (``DB_BEHIND_POOLER=1``),
LISTEN straight to the server (``DB_LISTEN_URL``).

:meth:`PgBouncer.session_leftovers` checks every server connection of the pool for what a client
may have left on it for the next one (session settings, prepared statements, cursors, LISTENs,
temporary tables, advisory locks): behind a transaction pooler each of them is a bug.
"""

import os
import shutil
import signal
import subprocess
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from pipeline_project.db.connections import connection_params
from pipeline_project.db.urls import database_url
from tests.helpers import free_port, unprivileged_user

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
needs_pgbouncer = pytest.mark.skipif(not Path(PGBOUNCER).exists(), reason="needs Debian's pgbouncer")

# Server connections per database: few, so that every client's transactions share them.
POOL_SIZE = 4
ALIASES = ("default", "pipeline")

CONFIG = """\
[databases]
{named}* = host={server_host} port={server_port}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {directory}/userlist.txt
admin_users = {user}
pool_mode = transaction
default_pool_size = {pool_size}
max_client_conn = 1000
query_wait_timeout = 30
log_connections = 0
log_disconnections = 0
logfile =
pidfile =
"""

# What PgBouncer itself keeps per client and sets on the server connection it lends (its tracked
# parameters): on a server connection these are the last client's, by design.
TRACKED_PARAMETERS = ("application_name", "client_encoding", "DateStyle", "TimeZone", "standard_conforming_strings")

# Everything a session can keep past its transaction, on the connection that runs this. A setting
# counts if it differs from what RESET would restore (SET TRANSACTION leaves the source of
# transaction_isolation at "session" with its default value: every transaction starts anew).
SESSION_STATE = """
SELECT
    (SELECT coalesce(jsonb_object_agg(name, setting), '{}') FROM pg_settings
     WHERE source = 'session' AND setting IS DISTINCT FROM reset_val AND name <> ALL(%(tracked)s)) AS settings,
    ARRAY(SELECT name FROM pg_prepared_statements) AS prepared_statements,
    ARRAY(SELECT name FROM pg_cursors WHERE name <> '') AS cursors,
    ARRAY(SELECT pg_listening_channels()) AS listening,
    ARRAY(SELECT relname::text FROM pg_class WHERE relnamespace = pg_my_temp_schema()) AS temporary_tables,
    ARRAY(SELECT objid::text FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()) AS advisory_locks
"""
SESSION_KINDS = ("settings", "prepared_statements", "cursors", "listening", "temporary_tables", "advisory_locks")


@dataclass
class PgBouncer:
    port: int
    process: subprocess.Popen
    log: Path
    command: list[str]

    def params(self, alias: str = "default") -> dict:
        """psycopg.connect() parameters of ``alias``'s (test) database through the pooler, as a
        client deployed behind it connects: no startup options, no prepared statements."""
        direct = connection_params(alias)
        return {
            **{key: direct[key] for key in ("dbname", "user", "password") if direct.get(key)},
            "host": "127.0.0.1",
            "port": self.port,
            "prepare_threshold": None,
        }

    def environment(self) -> dict[str, str]:
        """The environment of a manage.py process or web server deployed behind the pooler."""
        return {
            "DATABASE_URL": database_url(self.params("default")),
            "PIPELINE_DATABASE_URL": database_url(self.params("pipeline")),
            "DB_BEHIND_POOLER": "1",
            "DB_LISTEN_URL": database_url(connection_params("default")),
        }

    def restart(self, *, down_sec: float = 0) -> None:
        """Stop the pooler at once (SIGTERM: its clients' connections are cut) and start it again
        on its port ``down_sec`` later."""
        self.process.terminate()
        self.process.wait(timeout=10)
        time.sleep(down_sec)
        with self.log.open("a") as output:
            self.process = subprocess.Popen(self.command, stdout=output, stderr=subprocess.STDOUT)
        _wait_until_it_answers(self)

    def show(self, what: str) -> list[dict]:
        """A SHOW command of PgBouncer's admin console (CLIENTS, SERVERS, POOLS, ...), as rows."""
        params = {**self.params(), "dbname": "pgbouncer", "autocommit": True}
        # The console speaks only the simple query protocol, which a client-side-binding cursor uses.
        with psycopg.connect(**params, cursor_factory=psycopg.ClientCursor) as conn:
            cursor = conn.execute(f"SHOW {what}")
            names = [column.name for column in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def server_pids(self) -> set[int]:
        """Backend pids of the server connections the pooler holds now."""
        return {row["remote_pid"] for row in self.show("SERVERS")}

    def session_leftovers(self) -> dict[str, dict]:
        """What each server connection of both databases' pools kept from earlier clients:
        ``{"<database> pid <n>": {kind: [...]}}`` for those that kept something.

        As many clients as the pool has connections each open a transaction (which holds a server
        connection until it ends), so between them they look at every connection of the pool.
        """
        found = {}
        for alias in ALIASES:
            with ExitStack() as stack:
                for _ in range(POOL_SIZE):
                    conn = stack.enter_context(psycopg.connect(**self.params(alias)))
                    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
                    state = conn.execute(SESSION_STATE, {"tracked": list(TRACKED_PARAMETERS)}).fetchone()
                    kept = {kind: value for kind, value in zip(SESSION_KINDS, state, strict=True) if value}
                    if kept:
                        found[f"{conn.info.dbname} pid {pid}"] = kept
        return found

    def problems_logged(self) -> list[str]:
        """The pooler's warnings and errors so far (a query that waited too long, a failed login, ...)."""
        return [line for line in self.log.read_text().splitlines() if " WARNING " in line or " ERROR " in line]


@dataclass
class Route:
    """How a test's processes reach the databases: ``env`` for them, and the pooler if any."""

    name: str
    env: dict[str, str]
    bouncer: PgBouncer | None = None


@contextmanager
def started(
    directory: Path, *, server: dict, pool_size: int = POOL_SIZE, pools: dict[str, tuple[str, int]] | None = None
):
    """PgBouncer in front of the PostgreSQL server ``server`` (psycopg parameters) on a free port,
    its configuration, user list and log in ``directory``; stopped on exit. ``pools`` names more
    pools of their own: ``{name: (database, pool size)}`` (clients that connect to ``name`` share
    ``pool size`` server connections to ``database``, apart from the others)."""
    user = server.get("user") or "postgres"
    (directory / "userlist.txt").write_text(f'"{user}" ""\n')  # trust: the name must be listed, no password
    port = free_port()
    config = directory / "pgbouncer.ini"
    config.write_text(
        CONFIG.format(
            server_host=server["host"],
            server_port=server.get("port") or 5432,
            port=port,
            directory=directory,
            user=user,
            pool_size=pool_size,
            named="".join(
                f"{name} = host={server['host']} port={server.get('port') or 5432} dbname={database} pool_size={size}\n"
                for name, (database, size) in (pools or {}).items()
            ),
        )
    )
    log = directory / "pgbouncer.log"
    as_user = ["-u", unprivileged_user(server["host"])] if os.geteuid() == 0 else []
    command = [PGBOUNCER, *as_user, str(config)]
    with log.open("w") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
    bouncer = PgBouncer(port=port, process=process, log=log, command=command)
    try:
        _wait_until_it_answers(bouncer)
        yield bouncer
    finally:
        process = bouncer.process  # the one running now: restart() replaces it
        process.send_signal(signal.SIGINT)  # a safe shutdown: it waits for clients' transactions to end
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_until_it_answers(bouncer: PgBouncer, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            bouncer.show("VERSION")
            return
        except psycopg.OperationalError:
            if bouncer.process.poll() is not None or time.monotonic() > deadline:
                log = bouncer.log.read_text().splitlines()[-20:]
                raise RuntimeError("PgBouncer did not start:\n" + "\n".join(log)) from None
            time.sleep(0.05)
