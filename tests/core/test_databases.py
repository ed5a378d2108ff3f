"""Telling a database error that passes from one that refuses the statement, on real errors."""

import psycopg
import pytest
from django.db import DatabaseError, connection

from pipeline_project.databases import is_transient_error
from tests.conftest import ALL_DATABASES
from tests.db_helpers import raw_connection

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
