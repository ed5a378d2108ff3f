"""The notification hub on a real PostgreSQL: notifications sent from a second connection."""

import asyncio

import psycopg
import pytest

from pipeline_project.db.connections import connection_params
from pipeline_project.web import notifications
from pipeline_project.web.notifications import blocking_hub
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.helpers import wait_for

pytestmark = ALL_DATABASES_COMMITTED
CHANNEL = "test_hub"


@pytest.fixture(autouse=True)
def close_blocking_hub():
    yield
    blocking_hub.close()


def notify(*payloads: str) -> None:
    with psycopg.connect(**connection_params(), autocommit=True) as conn:
        for payload in payloads:
            conn.execute("SELECT pg_notify(%s, %s)", [CHANNEL, payload])


def listener():
    return blocking_hub._started()[1].listener(CHANNEL)


def test_a_subscription_gets_the_keys_it_names_with_their_data():
    with blocking_hub.subscribe(CHANNEL, ["a"]) as subscription:
        notify("b\nnot mine", "x,a\nmine")
        assert subscription.wait_blocking(5)
    assert subscription.received == {"a": "mine"}


def test_a_subscription_made_after_the_notification_gets_it_from_the_listeners_memory():
    since = blocking_hub.listening(CHANNEL)
    notify("7\n[1]")
    wait_for(lambda: listener().received == since.received + 1, what="the notification")

    with blocking_hub.subscribe(CHANNEL, ["7"], since=since) as subscription:
        assert subscription.wait_blocking(0)
    assert subscription.received == {"7": "[1]"}


def test_without_since_an_earlier_notification_is_not_replayed():
    blocking_hub.listening(CHANNEL)
    notify("8\nold")
    wait_for(lambda: "8" in listener().recent, what="the notification")

    with blocking_hub.subscribe(CHANNEL, ["8"]) as subscription:
        assert not subscription.wait_blocking(0.05)


def test_when_the_memory_may_have_forgotten_the_key_the_subscription_is_woken_to_re_read(monkeypatch):
    monkeypatch.setattr(notifications, "RECENT_NOTIFICATIONS", 3)
    since = blocking_hub.listening(CHANNEL)
    notify("1\nfirst", "2", "3", "4")
    wait_for(lambda: listener().received == since.received + 4, what="the notifications")

    with blocking_hub.subscribe(CHANNEL, ["1"], since=since) as subscription:
        assert subscription.wait_blocking(0)
    assert subscription.received == {}  # nothing to trust: read


def test_a_lost_listen_connection_wakes_later_subscriptions_to_re_read():
    since = blocking_hub.listening(CHANNEL)
    with psycopg.connect(**connection_params(), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [listener()._connection.info.backend_pid])
    wait_for(lambda: listener().connections > since.connection, what="the listener to notice")

    with blocking_hub.subscribe(CHANNEL, ["9"], since=since) as subscription:
        assert subscription.wait_blocking(0)
    assert subscription.received == {}


def test_a_listen_connection_left_on_a_server_that_no_longer_takes_writes_is_made_again(monkeypatch):
    monkeypatch.setattr(notifications, "LISTENER_CHECK_SEC", 0.1)
    since = blocking_hub.listening(CHANNEL)
    loop, _hub = blocking_hub._started()
    fenced = listener()._connection
    # What a primary fenced read-only says to its sessions (as after ALTER SYSTEM SET
    # default_transaction_read_only = on and a reload): the parameter, reported with an answer.
    asyncio.run_coroutine_threadsafe(fenced.execute("SET default_transaction_read_only = on"), loop).result(5)

    wait_for(lambda: listener().connections > since.connection, what="the listener to leave the server")

    with blocking_hub.subscribe(CHANNEL, ["7"], since=since) as subscription:
        assert subscription.wait_blocking(0)  # woken to re-read what it may have missed
    # One count for the connection left, one for the LISTEN made again.
    wait_for(lambda: listener().connections >= since.connection + 2, what="a new LISTEN")
    assert fenced.closed
    with blocking_hub.subscribe(CHANNEL, ["8"]) as subscription:
        notify("8\nback")
        assert subscription.wait_blocking(5) and subscription.received == {"8": "back"}
