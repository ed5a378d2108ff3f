"""The one loop that follows a NOTIFY channel until done, on the event loop and on a thread."""

import asyncio
import threading
import time
from unittest import mock

import pytest

from pipeline_project.web.follow import CLOCK_GRAIN_SEC, NOTHING_YET, Read, follow, follow_blocking
from pipeline_project.web.notifications import BlockingSubscription, NotificationHub, Subscription, _ChannelListener


class Script:
    """A read that answers from a list of Reads and counts itself."""

    def __init__(self, *answers: Read):
        self.answers = list(answers)
        self.calls = 0
        self.seen: list[dict] = []

    def __call__(self, received: dict) -> Read:
        self.calls += 1
        self.seen.append(dict(received))
        return self.answers.pop(0) if self.answers else NOTHING_YET

    async def async_read(self, received: dict) -> Read:
        return self(received)


def collect(subscription, script: Script, **options) -> list:
    async def run():
        return [item async for item in follow(subscription, script.async_read, **options)]

    return asyncio.run(run())


def test_reads_until_done_waking_on_notifications():
    async def run():
        subscription = Subscription()
        script = Script(Read([1]), NOTHING_YET, Read([2, 3], done=True))
        asyncio.get_running_loop().call_later(0.05, subscription.wake, "k", "data")
        asyncio.get_running_loop().call_later(0.10, subscription.wake)
        started = time.monotonic()
        steps = follow(subscription, script.async_read, deadline=time.monotonic() + 10, recheck_sec=5)
        items = [item async for item in steps]
        return items, script, time.monotonic() - started

    items, script, took = asyncio.run(run())

    assert items == [1, 2, 3] and script.calls == 3
    assert script.seen[1] == {"k": "data"}  # what the notification carried, for the read to use
    assert took < 1  # woken by the notifications, not the 5 s recheck


def test_a_full_page_is_read_again_at_once_and_a_lost_notification_is_made_up_by_the_recheck():
    script = Script(Read([1], more=True), Read([2]), Read([3], done=True))
    started = time.monotonic()

    items = collect(Subscription(), script, deadline=time.monotonic() + 10, recheck_sec=0.2)

    assert items == [1, 2, 3]
    assert 0.2 <= time.monotonic() - started < 1  # one recheck: the full page waited for nothing


def test_it_stops_at_the_deadline_or_without_a_subscription():
    started = time.monotonic()
    assert collect(Subscription(), Script(Read([1])), deadline=time.monotonic() + 0.3, recheck_sec=0.1) == [1]
    assert 0.3 - CLOCK_GRAIN_SEC <= time.monotonic() - started < 1  # what is left below the grain counts as none

    script = Script(Read([1]), Read([2], done=True))
    assert collect(None, script, deadline=time.monotonic() + 10, recheck_sec=0.1) == [1]  # no follow: one read
    assert script.calls == 1


def test_waiting_first_reads_nothing_until_woken():
    subscription = Subscription()
    subscription.wake("k", "early")  # came between listening and subscribing (a hub's catch-up)
    script = Script(Read(["done"], done=True))

    assert collect(subscription, script, deadline=time.monotonic() + 10, recheck_sec=5, wait_first=True) == ["done"]
    assert script.seen == [{"k": "early"}]
    script = Script()
    assert collect(Subscription(), script, deadline=time.monotonic() + 0.1, recheck_sec=5, wait_first=True) == []
    assert script.calls == 1  # woken by the recheck at the deadline, read once, then out of time


def test_the_same_loop_runs_on_a_thread_with_a_blocking_subscription():
    subscription = BlockingSubscription()
    script = Script(NOTHING_YET, Read(["ended"], done=True))
    threading.Timer(0.1, subscription.wake, args=("k", "outcome")).start()
    started = time.monotonic()

    assert list(follow_blocking(subscription, script, deadline=time.monotonic() + 10, recheck_sec=5)) == ["ended"]
    assert time.monotonic() - started < 1 and script.seen[1] == {"k": "outcome"}


class Suspending:
    """A subscription whose wait gives the event loop a turn: a thread has no loop to give it to."""

    received: dict = {}
    ended = False

    async def wait(self, timeout: float) -> bool:  # noqa: ASYNC109 - Subscription.wait's signature
        await asyncio.sleep(0)
        return False


def test_a_blocking_follow_refuses_a_subscription_that_would_suspend():
    with pytest.raises(RuntimeError, match="needs a BlockingSubscription"):
        list(follow_blocking(Suspending(), Script(), deadline=time.monotonic() + 1, recheck_sec=0.1))


def test_a_follow_ends_after_its_read_when_the_hub_ends_it_as_the_server_stops():
    async def run():
        hub = NotificationHub()
        subscription = Subscription()
        hub.attach("channel", ["k"], subscription)
        script = Script(Read([1]))
        asyncio.get_running_loop().call_later(0.05, hub.end)
        started = time.monotonic()
        items = [item async for item in follow(subscription, script.async_read, deadline=started + 30, recheck_sec=10)]
        return items, time.monotonic() - started, script.calls

    items, took, reads = asyncio.run(run())

    assert items == [1] and took < 1  # not the 10 s recheck nor the 30 s deadline
    assert reads == 1  # ended, not woken to read again


def test_a_subscription_made_after_the_hub_ended_waits_for_nothing():
    hub = NotificationHub()
    hub.end()

    async def run():
        async with hub.subscribe("channel", ["k"]) as subscription:
            return subscription.ended

    with mock.patch.object(_ChannelListener, "start", new=mock.AsyncMock()):
        assert asyncio.run(run())
