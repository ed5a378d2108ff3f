"""Plain psycopg access to the project's databases, beside Django's connections."""

import contextlib
import functools
import select
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import psycopg
from psycopg import pq, sql
from psycopg.conninfo import conninfo_to_dict

# SQLSTATE classes of errors that pass: connection (08), transaction rollback (40: deadlock,
# serialization), insufficient resources (53), operator intervention (57: shutdown, cancel),
# system (58). Others (22 data, 23 integrity, 54 program limit, 42 ...) refuse the statement itself.
TRANSIENT_SQLSTATE_CLASSES = frozenset({"08", "40", "53", "57", "58"})
# And a write sent to a server that no longer takes writes (a primary fenced read-only before a
# switchover, a demoted one): the same statement passes on the new primary.
TRANSIENT_SQLSTATES = frozenset({"25006"})  # read_only_sql_transaction
# A LISTEN connection is asked this often whether its server still takes writes: left on one that
# does not, it would never be notified again (the writes, and their NOTIFYs, go to the new primary).
LISTENER_CHECK_SEC = 2.0
LISTENER_CHECK_SQL = "SELECT pg_is_in_recovery()"  # what a LISTEN connection runs besides LISTEN


class ServerReadOnly(psycopg.OperationalError):
    """The server of a connection no longer takes writes: the connection must go (a new one finds
    the primary: ``target_session_attrs=read-write``)."""


# Django passes these to psycopg.connect for its own cursors; a plain connection must not get them.
_DJANGO_ONLY_PARAMS = ("cursor_factory", "context")
# What names the server, database and role of a connection (the rest are options of the session).
_TARGET_PARAMS = frozenset({"host", "hostaddr", "port", "dbname", "user", "password", "passfile", "service"})


def connection_params(alias: str = "default") -> dict:
    """psycopg.connect() keyword arguments for a Django database alias (test databases included)."""
    from django.db import connections

    params = connections[alias].get_connection_params()
    for key in _DJANGO_ONLY_PARAMS:
        params.pop(key, None)
    return params


def listen_connection_params() -> dict:
    """psycopg.connect() keyword arguments for a connection that LISTENs on the default database:
    ``DB_LISTEN_URL`` if set (behind a transaction pooler, a direct connection: the pooler would
    hand the LISTEN's session to other clients), else the default database's. The URL names the
    whole target (nothing of the pooler's host, port or role is kept); the rest (application
    name, encoding, no prepared statements) is the default database's."""
    from django.conf import settings

    params = connection_params("default")
    if settings.DB_LISTEN_URL:
        params = {key: value for key, value in params.items() if key not in _TARGET_PARAMS}
        params.update(conninfo_to_dict(settings.DB_LISTEN_URL))
    return params


def ensure_databases(*, params: dict, names: tuple[str, ...]) -> None:
    """Create each database in ``names`` on the server ``params`` point at, if missing (safe to race)."""
    with psycopg.connect(**{**params, "dbname": "postgres", "autocommit": True}) as conn:
        existing = {row[0] for row in conn.execute("SELECT datname FROM pg_database")}
        for name in names:
            if name in existing:
                continue
            # Another process may have created it first.
            with contextlib.suppress(psycopg.errors.DuplicateDatabase, psycopg.errors.UniqueViolation):
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def is_transient_error(exc: BaseException) -> bool:
    """Whether a database error may pass if the statement is tried again later (a restart, a
    dropped connection), as opposed to a refusal of the statement's data."""
    from django.db import InterfaceError, OperationalError

    if isinstance(exc, (InterfaceError, psycopg.InterfaceError)):
        return True
    cause = exc if isinstance(exc, psycopg.Error) else exc.__cause__
    sqlstate = getattr(cause, "sqlstate", None)
    if sqlstate is None:  # no answer from the server at all: the connection failed
        return isinstance(exc, (OperationalError, psycopg.OperationalError))
    return sqlstate[:2] in TRANSIENT_SQLSTATE_CLASSES or sqlstate in TRANSIENT_SQLSTATES


def takes_writes(conn: psycopg.Connection | psycopg.AsyncConnection) -> bool:
    """Whether the server of ``conn`` takes writes, as it last said (no round trip): a standby
    (``in_hot_standby``) or a primary fenced read-only (``default_transaction_read_only``) does not.
    PostgreSQL 14 and later report both at connection and with the answer after either changes.
    (Through a pooler neither is reported: the pooler's own servers are its business.)"""
    status = conn.pgconn.parameter_status
    return status(b"in_hot_standby") != b"on" and status(b"default_transaction_read_only") != b"on"


def check_listener(conn: psycopg.Connection) -> None:
    """A round trip on a LISTEN connection (a dead one raises), then whether its server still takes
    writes (``ServerReadOnly`` if not)."""
    listener_checked(conn, conn.execute(LISTENER_CHECK_SQL).fetchone()[0])


def listener_checked(conn: psycopg.Connection | psycopg.AsyncConnection, in_recovery: bool) -> None:
    """``ServerReadOnly`` if the answer to LISTENER_CHECK_SQL, or what the server reported with it,
    says that it no longer takes writes."""
    if in_recovery or not takes_writes(conn):
        raise ServerReadOnly("the LISTEN connection's server no longer takes writes")


def release_connections(*, abandon_transactions: bool = True) -> None:
    """Give this thread's connections back to the pool (a lane does after every run). The pool
    rolls back a transaction left open and discards a connection that died. Without
    ``abandon_transactions``, a connection inside an atomic block (its caller's) is kept."""
    from django.db import connections

    for conn in connections.all(initialized_only=True):
        if conn.connection is not None and (abandon_transactions or not conn.in_atomic_block):
            conn.close()


def returning_connections[**P, R](func: Callable[P, R]) -> Callable[P, R]:
    """``func``, giving the calling thread's connections back to the pool when it returns: for
    the synchronous part of an async view that then waits on the event loop, so that the wait
    holds no connection."""

    @functools.wraps(func)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        finally:
            release_connections(abandon_transactions=False)

    return call


def apart_from_this_transaction[R](work: Callable[[], R]) -> R:
    """``work``'s result, ``work`` run on a thread of its own, so on a pooled connection of its
    own in autocommit: each statement commits whatever transaction the caller is in (batches of
    a periodic task, which runs inside one), and VACUUM may run. The connection is the pool's,
    so the process holds no more than its pool and its LISTEN."""

    def run() -> R:
        try:
            return work()
        finally:
            release_connections()

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="apart") as thread:
        return thread.submit(run).result()


def session_set(conn: psycopg.Connection, parameters: dict[str, str], *, restore: bool) -> None:
    """Set session parameters on a pooled connection the calling thread holds, in one statement
    (none if they are already set). With ``restore`` they are reset before the pool lends the
    connection to anyone else (``check_pooled_connection``); without, they stay for its next
    borrowers: only for settings that change no result (how statements are planned)."""
    session = conn.__dict__.setdefault("_session_set", {})
    wanted = {name: value for name, value in parameters.items() if session.get(name) != value}
    if not wanted:
        return
    calls = sql.SQL(", ").join(
        sql.SQL("set_config({}, {}, false)").format(name, value) for name, value in wanted.items()
    )
    conn.execute(sql.SQL("SELECT {}").format(calls))
    session.update(wanted)
    if restore:
        conn.__dict__.setdefault("_session_restore", set()).update(wanted)


def check_pooled_connection(conn: psycopg.Connection) -> None:
    """The pool's check before it lends a connection. No round trip (a worker's lane borrows one
    per run): a connection known to be dead, or to a server that no longer takes writes, is
    refused, and the pool opens another. Known dead: it failed, or the server ended it while it sat
    idle in the pool (a terminated backend, a restart): the server then sends its reason and closes
    the socket, which an idle connection is sent nothing else on. Session settings the last
    borrower changed for itself (``session_set``) are reset first."""
    if conn.closed or conn.broken or ended_while_idle(conn):
        raise psycopg.OperationalError("the pooled connection is closed")
    if not takes_writes(conn):
        conn.close()  # closed, the pool opens another; open, it would take this one back as good
        raise ServerReadOnly("the pooled connection's server no longer takes writes")
    restore = conn.__dict__.pop("_session_restore", ())
    if restore:
        with conn.pipeline():  # one round trip
            for name in restore:
                conn.execute(sql.SQL("RESET {}").format(sql.Identifier(name)))
                conn.__dict__["_session_set"].pop(name, None)


def ended_while_idle(conn: psycopg.Connection) -> bool:
    """Whether the server ended an idle connection: its socket has something to read (a poll, no
    round trip) and reading it ends at the socket's end. A live one read that way (a notification)
    has nothing more to read; an ended one still has its end."""
    try:
        poller = select.poll()
        poller.register(conn.pgconn.socket, select.POLLIN)
        for _read in range(2):  # the server's reason, then the end of the stream
            if not poller.poll(0):
                return False
            conn.pgconn.consume_input()
            if conn.pgconn.status != pq.ConnStatus.OK:
                return True
    except (OSError, psycopg.OperationalError):
        return True
    return False


# --- waits a stopping process cuts short --------------------------------------------------------


@dataclass
class _ConnectionWaits:
    end_at: float | None = None  # monotonic time no wait for a connection may outlast (None: none)
    interrupted: set[int] = field(default_factory=set)  # threads whose current wait is to end now


_waits = _ConnectionWaits()


def end_connection_waits_at(deadline: float | None) -> None:
    """From now on, no wait of this process for a pooled connection lasts past ``deadline``
    (``time.monotonic()``), those already waiting included (``None``: no limit again). A stopping
    runworker sets it so that a database that is gone cannot hold its exit."""
    _waits.end_at = deadline


def interrupt_connection_wait(thread_id: int) -> None:
    """End the wait for a pooled connection that thread ``thread_id`` is in, if any, at once (its
    later waits are not affected): a stop interrupts the threads that need not wait for it."""
    _waits.interrupted.add(thread_id)


def connection_wait_started() -> None:
    """Called as a thread starts to wait: an interruption meant for an earlier wait is void."""
    _waits.interrupted.discard(threading.get_ident())


def connection_wait_left(timeout: float) -> float:
    """How long the calling thread's wait, meant to last ``timeout`` seconds, may last now."""
    if threading.get_ident() in _waits.interrupted:
        return 0.0
    if _waits.end_at is None:
        return timeout
    return max(0.0, min(timeout, _waits.end_at - time.monotonic()))


def connection_wait_cut() -> bool:
    """Whether the calling thread's wait for a connection was cut short by a stop."""
    ident = threading.get_ident()
    if ident in _waits.interrupted:
        _waits.interrupted.discard(ident)
        return True
    return _waits.end_at is not None and time.monotonic() >= _waits.end_at
