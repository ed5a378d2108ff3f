"""Telling a database error that passes from one that refuses the statement, on real errors; the
process's bounded connection pool."""

import threading
import time

import psycopg
import pytest
from django.conf import settings
from django.db import DatabaseError, connection
from prometheus_client import REGISTRY
from psycopg_pool import ConnectionPool, PoolTimeout

from pipeline_project.databases import (
    check_pooled_connection,
    connection_params,
    end_connection_waits_at,
    interrupt_connection_wait,
    is_transient_error,
    session_set,
)
from pipeline_project.postgresql.base import DatabaseWrapper, WaitCut
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


def test_session_settings_a_borrower_made_for_itself_are_reset_before_the_next():
    with ConnectionPool(
        kwargs={**connection_params(), "autocommit": True}, min_size=1, max_size=1, check=check_pooled_connection
    ) as pool:
        with pool.connection() as conn:
            session_set(conn, {"synchronous_commit": "off"}, restore=True)
            session_set(conn, {"plan_cache_mode": "force_generic_plan"}, restore=False)
            first = conn.info.backend_pid
        with pool.connection() as conn:
            assert conn.info.backend_pid == first  # the same session, lent again
            assert conn.execute("SHOW synchronous_commit").fetchone()[0] == "on"
            assert conn.execute("SHOW plan_cache_mode").fetchone()[0] == "force_generic_plan"
            session_set(conn, {"synchronous_commit": "off"}, restore=True)  # set again: it was reset
            assert conn.execute("SHOW synchronous_commit").fetchone()[0] == "off"


def test_the_pool_lends_no_connection_known_to_be_dead():
    with ConnectionPool(
        kwargs={**connection_params(), "autocommit": True}, min_size=1, max_size=1, check=check_pooled_connection
    ) as pool:
        with pool.connection() as conn:
            first = conn.info.backend_pid
            with raw_connection(autocommit=True) as killer:
                killer.execute("SELECT pg_terminate_backend(%s)", [first])
            with pytest.raises(psycopg.OperationalError):
                conn.execute("SELECT 1")
        with pool.connection() as conn:
            assert conn.execute("SELECT pg_backend_pid()").fetchone()[0] != first


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
