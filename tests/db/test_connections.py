"""Telling a database error that passes from one that refuses the statement, on real errors; the
process's bounded connection pool."""

import contextlib
import socket
import threading
import time

import psycopg
import pytest
from django.conf import settings
from django.db import DatabaseError, connection
from prometheus_client import REGISTRY
from psycopg_pool import ConnectionPool, PoolTimeout

from pipeline_project.db.connections import (
    ServerReadOnly,
    check_listener,
    check_pooled_connection,
    connection_params,
    end_connection_waits_at,
    ended_while_idle,
    interrupt_connection_wait,
    is_transient_error,
    session_set,
    takes_writes,
)
from pipeline_project.db.postgresql.base import DatabaseWrapper, WaitCut
from tests.conftest import ALL_DATABASES
from tests.db_helpers import raw_connection, run_in_threads

pytestmark = ALL_DATABASES


def error_of(sql: str) -> DatabaseError:
    with pytest.raises(DatabaseError) as caught, connection.cursor() as cursor:
        cursor.execute(sql)
    return caught.value


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 'NaN'::float8::text::jsonb",  # 22: data
        "SELECT 1 / 0",  # 22: division by zero
        "CREATE TEMP TABLE t (k text UNIQUE); INSERT INTO t SELECT string_agg(md5(i::text), '') FROM generate_series(1, 200) i",  # 54: index row too large
        "SELECT * FROM no_such_table",  # 42: undefined table
    ],
)
def test_refusals_of_the_statement_are_not_transient(sql):
    assert not is_transient_error(error_of(sql))


def test_a_canceled_statement_and_a_closed_connection_are_transient():
    assert is_transient_error(error_of("SET LOCAL statement_timeout = 1; SELECT pg_sleep(1)"))
    with raw_connection() as conn:
        conn.close()
        with pytest.raises(psycopg.Error) as closed:
            conn.execute("SELECT 1")
    assert is_transient_error(closed.value)


def test_a_terminated_session_is_transient():
    with raw_connection(autocommit=True) as victim, raw_connection(autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [victim.info.backend_pid])
        with pytest.raises(psycopg.Error) as terminated:
            victim.execute("SELECT 1")
    assert is_transient_error(terminated.value)


def test_threads_share_one_bounded_pool_and_their_waits_are_measured():
    """More threads than DB_POOL_SIZE, each holding a connection for a while: they get no more
    backends than the pool's size, and those that waited are in the wait histogram."""
    waited_before = waited_sec()

    def hold(_index):
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid() FROM pg_sleep(0.1)")
            return cursor.fetchone()[0]

    backends = run_in_threads(settings.DB_POOL_SIZE * 2, hold)

    assert len(set(backends)) <= settings.DB_POOL_SIZE - 1  # the test's own connection holds one
    assert waited_sec() - waited_before > 0.1


def waited_sec() -> float:
    return REGISTRY.get_sample_value("db_pool_wait_seconds_sum", {"database": "default"}) or 0.0


def pool_of_one() -> ConnectionPool:
    """A pool of one connection with the project's check before lending."""
    return ConnectionPool(
        kwargs={**connection_params(), "autocommit": True}, min_size=1, max_size=1, check=check_pooled_connection
    )


def test_session_settings_a_borrower_made_for_itself_are_reset_before_the_next():
    with pool_of_one() as pool:
        with pool.connection() as conn:
            session_set(conn, {"synchronous_commit": "off", "enable_seqscan": "off"}, restore=True)
            session_set(conn, {"plan_cache_mode": "force_generic_plan"}, restore=False)
            first = conn.info.backend_pid
        with pool.connection() as conn:
            assert conn.info.backend_pid == first  # the same session, lent again
            assert conn.execute("SHOW synchronous_commit").fetchone()[0] == "on"
            assert conn.execute("SHOW enable_seqscan").fetchone()[0] == "on"
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
            assert conn.execute("SHOW plan_cache_mode").fetchone()[0] == "force_generic_plan"
            session_set(conn, {"synchronous_commit": "off"}, restore=True)  # set again: it was reset
            assert conn.execute("SHOW synchronous_commit").fetchone()[0] == "off"


def test_a_write_on_a_server_that_no_longer_takes_writes_is_transient_and_the_server_says_so():
    """As a primary fenced read-only before a switchover answers (ALTER SYSTEM SET
    default_transaction_read_only = on, reloaded): SQLSTATE 25006, and the parameter reported."""
    with raw_connection(autocommit=True) as conn:
        assert takes_writes(conn)
        conn.execute("SET default_transaction_read_only = on")
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction) as refused:
            conn.execute("CREATE TEMP TABLE t (n int)")
        assert not takes_writes(conn)
    assert is_transient_error(refused.value)
    assert is_transient_error(error_of("SET LOCAL transaction_read_only = on; CREATE TEMP TABLE t (n int)"))


def test_the_pool_lends_no_connection_to_a_server_that_no_longer_takes_writes():
    with pool_of_one() as pool:
        with pool.connection() as conn:
            first = conn.info.backend_pid
            conn.execute("SET default_transaction_read_only = on")
        with pool.connection() as conn:
            assert conn.execute("SELECT pg_backend_pid()").fetchone()[0] != first
            assert conn.execute("SHOW default_transaction_read_only").fetchone()[0] == "off"
    with raw_connection(autocommit=True) as conn:
        conn.execute("SET default_transaction_read_only = on")
        with pytest.raises(ServerReadOnly):
            check_pooled_connection(conn)


def test_a_listen_connection_is_checked_alive_and_on_a_server_that_takes_writes():
    with raw_connection(autocommit=True) as conn:
        check_listener(conn)
        conn.execute("SET default_transaction_read_only = on")
        with pytest.raises(ServerReadOnly):
            check_listener(conn)
        conn.close()
        with pytest.raises(psycopg.OperationalError):
            check_listener(conn)


def test_the_service_connects_only_to_a_server_that_takes_writes():
    """Its connections ask for read-write (a standby of the primary's hosts list is passed over)."""
    assert connection_params()["target_session_attrs"] == "read-write"


def test_the_pool_lends_no_connection_known_to_be_dead():
    with pool_of_one() as pool:
        with pool.connection() as conn:
            first = conn.info.backend_pid
            with raw_connection(autocommit=True) as killer:
                killer.execute("SELECT pg_terminate_backend(%s)", [first])
            with pytest.raises(psycopg.OperationalError):
                conn.execute("SELECT 1")
        with pool.connection() as conn:
            assert conn.execute("SELECT pg_backend_pid()").fetchone()[0] != first


def test_a_connection_the_server_ended_while_it_sat_idle_is_not_lent():
    """A backend terminated while its connection sat in the pool (a kill, a restart) is found
    before the borrower's first statement: the borrower gets another and sees no error."""
    with pool_of_one() as pool:
        with pool.connection() as conn:
            first = conn.info.backend_pid
        with raw_connection(autocommit=True) as killer:
            killer.execute("SELECT pg_terminate_backend(%s, 5000)", [first])  # waits until it has gone
        with pool.connection() as conn:
            assert conn.execute("SELECT pg_backend_pid()").fetchone()[0] != first


def test_an_idle_connection_the_server_only_told_something_is_lent():
    with psycopg.connect(**connection_params(), autocommit=True) as conn:
        conn.execute("LISTEN pooled_check")
        with raw_connection(autocommit=True) as other:
            other.execute("NOTIFY pooled_check")
        time.sleep(0.2)

        assert not ended_while_idle(conn)  # a message to read, and the connection alive
        assert conn.execute("SELECT 1").fetchone() == (1,)


def pooled_wrapper(*, timeout: float = 1, **changes) -> DatabaseWrapper:
    """A second wrapper of the default database's settings, with a pool of one and a 1-s wait."""
    settings_dict = {**connection.settings_dict, **changes}
    pool = {**settings_dict["OPTIONS"]["pool"], "max_size": 1, "timeout": timeout}
    return DatabaseWrapper({**settings_dict, "OPTIONS": {**settings_dict["OPTIONS"], "pool": pool}}, alias="second")


def test_a_pool_that_cannot_connect_names_the_cause():
    wrapper = pooled_wrapper(NAME="no_database_of_this_name")
    try:
        with pytest.raises(psycopg.OperationalError, match='database "no_database_of_this_name" does not exist'):
            wrapper.connect()
    finally:
        wrapper.close_pool()


def test_a_pool_whose_connections_are_all_busy_says_so():
    wrapper = pooled_wrapper()
    try:
        wrapper.pool.open()
        held = wrapper.pool.getconn()  # the pool's only connection
        with pytest.raises(PoolTimeout):
            wrapper.connect()
        wrapper.pool.putconn(held)
    finally:
        wrapper.close_pool()


def test_a_stop_ends_the_waits_for_a_connection_at_its_deadline_and_the_interrupted_one_at_once():
    wrapper = pooled_wrapper(timeout=30)
    waited: dict[str, float] = {}

    def wait(name: str) -> None:
        started = time.monotonic()
        try:
            wrapper.pool.putconn(wrapper.pool.getconn())
        except WaitCut:
            waited[name] = time.monotonic() - started

    waiters = {name: threading.Thread(target=wait, args=(name,)) for name in ("until the deadline", "interrupted")}
    try:
        wrapper.pool.open()
        held = wrapper.pool.getconn()  # the pool's only connection: both wait for it
        for thread in waiters.values():
            thread.start()
        time.sleep(0.3)
        interrupt_connection_wait(waiters["interrupted"].ident)
        end_connection_waits_at(time.monotonic() + 1)
        for thread in waiters.values():
            thread.join(timeout=10)
        wrapper.pool.putconn(held)
        after_the_stop = wrapper.pool.getconn(timeout=0.5)  # an idle connection is still lent at once
        wrapper.pool.putconn(after_the_stop)
    finally:
        end_connection_waits_at(None)
        wrapper.close_pool()

    assert waited["interrupted"] < 0.3 + 0.5
    assert 1.2 <= waited["until the deadline"] < 2.0


class Gate:
    """A TCP port in front of the test database's server that hangs up on every client until opened."""

    def __init__(self, settings_dict: dict):
        host, port = settings_dict["HOST"] or "127.0.0.1", int(settings_dict["PORT"] or 5432)
        self.upstream = (
            (socket.AF_UNIX, f"{host}/.s.PGSQL.{port}") if host.startswith("/") else (socket.AF_INET, (host, port))
        )
        self.opened = False
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:  # closed
                return
            if not self.opened:
                client.close()
                continue
            server = socket.socket(self.upstream[0])
            server.connect(self.upstream[1])
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)


def test_a_pool_the_database_refuses_tells_at_once_and_reconnects_within_a_second_of_its_return():
    gate = Gate(connection.settings_dict)
    wrapper = pooled_wrapper(timeout=30, HOST="127.0.0.1", PORT=str(gate.port))
    try:
        wrapper.pool.open()
        started = time.monotonic()
        with pytest.raises(psycopg.OperationalError, match="refuses connections"):
            wrapper.pool.getconn()
        told_after = time.monotonic() - started
        # psycopg_pool alone would try again 1, 2, 4, 8 s apart: after 3.2 s, its next try is at 7 s.
        time.sleep(3.2)
        gate.opened = True
        opened_at = time.monotonic()
        while True:
            try:
                wrapper.pool.putconn(wrapper.pool.getconn())
                break
            except psycopg.OperationalError:
                assert time.monotonic() - opened_at < 5, "the pool did not reconnect"
                time.sleep(0.02)
        back_after = time.monotonic() - opened_at
    finally:
        wrapper.close_pool()
        gate.listener.close()

    assert told_after < 1, told_after  # not the pool's 30 s timeout
    assert back_after < 1, back_after


def test_a_pool_with_a_connection_lent_waits_for_it_though_the_database_refuses_more():
    gate = Gate(connection.settings_dict)
    gate.opened = True
    wrapper = pooled_wrapper(timeout=5, HOST="127.0.0.1", PORT=str(gate.port))
    try:
        wrapper.pool.open()
        wrapper.pool.resize(min_size=0, max_size=2)
        held = wrapper.pool.getconn()
        gate.opened = False  # the slots are full, say: the pool cannot grow
        threading.Timer(0.5, wrapper.pool.putconn, [held]).start()
        started = time.monotonic()
        wrapper.pool.putconn(wrapper.pool.getconn())  # waits for the one that comes back
        waited = time.monotonic() - started
    finally:
        wrapper.close_pool()
        gate.listener.close()

    assert 0.4 < waited < 2, waited
