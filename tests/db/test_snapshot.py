import pytest
from django.db import connection, transaction

from pipeline_project.core.models import ApiToken
from pipeline_project.db.snapshot import snapshot
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.db_helpers import raw_connection

pytestmark = ALL_DATABASES_COMMITTED


def _token_count() -> int:
    return ApiToken.objects.count()


def test_reads_inside_see_the_state_of_the_first_one():
    with snapshot():
        before = _token_count()
        with raw_connection(autocommit=True) as writer:  # a commit between the two reads
            writer.execute(
                "INSERT INTO api_tokens (name, key_prefix, key_hash, created_at, scopes) VALUES ('w', 'p', 'h', now(), '{read}')"
            )
        assert _token_count() == before
    assert _token_count() == before + 1


def test_it_is_read_only_and_repeatable_read():
    with snapshot(), connection.cursor() as cursor:
        cursor.execute("SHOW transaction_isolation")
        assert cursor.fetchone()[0] == "repeatable read"
        cursor.execute("SHOW transaction_read_only")
        assert cursor.fetchone()[0] == "on"


def test_as_a_decorator_each_call_is_its_own_snapshot():
    @snapshot()
    def isolation():
        with connection.cursor() as cursor:
            cursor.execute("SHOW transaction_isolation")
            return cursor.fetchone()[0]

    assert isolation() == isolation() == "repeatable read"
    assert not connection.in_atomic_block


def test_inside_an_open_transaction_the_reads_join_it():
    with transaction.atomic():
        ApiToken.objects.create(name="inside", key_hash="x", key_prefix="x")
        with snapshot():
            assert ApiToken.objects.filter(name="inside").exists()  # the transaction's own write
    with pytest.raises(RuntimeError), snapshot():
        raise RuntimeError  # an error inside leaves no transaction open
    assert not connection.in_atomic_block
