"""Following a NOTIFY channel until done: the one loop every event stream and waiter runs.

A follower subscribes to its keys on a channel first (``NotificationHub.subscribe``), then
:func:`follow` reads, hands on what the read found, and waits for the next notification naming
a key — or ``recheck_sec``, in case one was lost — before it reads again; it stops when a read
says it is done, or at the deadline. What to read, and when it is done, is the follower's own
(:class:`Read`); how it waits is the subscription's.

Async callers (the NDJSON streams, async views) pass a hub ``Subscription`` and an async read.
Threads pass a ``BlockingSubscription``, whose wait blocks the thread instead of suspending, and
a plain read, through :func:`follow_blocking`: the same loop, driven without an event loop.
"""

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Read:
    """What one read found: ``items`` to hand on; ``done``: nothing more will come (stop after
    them); ``more``: a full page, read again at once."""

    items: Sequence[Any] = ()
    done: bool = False
    more: bool = False


NOTHING_YET = Read()  # not done, nothing to hand on: wait, then read again

# uvloop's timers fire early by a few milliseconds (their delay is cut to whole milliseconds from
# a clock read when the loop's turn began): what is left below this is no time, or the loop would
# read again and again in the last milliseconds before a deadline.
CLOCK_GRAIN_SEC = 0.01


async def follow(
    subscription,
    read: Callable[[dict[str, str]], Awaitable[Read]],
    *,
    deadline: float,
    recheck_sec: float,
    wait_first: bool = False,
) -> AsyncIterator[Any]:
    """Yield what ``read(received)`` finds until it says done or the ``deadline`` (monotonic)
    passes, waiting on ``subscription`` between reads that found nothing more to read now.

    ``received`` holds the data notifications carried for each key (a read may find its answer
    there and not query at all). With ``wait_first`` the first read waits for a wake-up (the
    caller listened before it wrote what will be notified). With no subscription, a read that
    is not done ends the follow.
    """
    if wait_first and not await _waited(subscription, deadline, recheck_sec):
        return
    while True:
        found = await read(subscription.received if subscription is not None else {})
        for item in found.items:
            yield item
        if found.done:
            return
        if not found.more and not await _waited(subscription, deadline, recheck_sec):
            return


async def _waited(subscription, deadline: float, recheck_sec: float) -> bool:
    """Wait for a wake-up or ``recheck_sec``; False if there is nothing to wait for, no time left,
    or the server is stopping (the subscription ``ended``)."""
    left = deadline - time.monotonic()
    if subscription is None or subscription.ended or left <= CLOCK_GRAIN_SEC:
        return False
    await subscription.wait(min(recheck_sec, left))
    return not subscription.ended


def follow_blocking(subscription, read: Callable[[dict[str, str]], Read], **options) -> Iterator[Any]:
    """:func:`follow` on a thread: ``subscription`` is a ``BlockingSubscription`` (its waits block
    this thread) and ``read`` a plain function, so the loop never suspends and runs here to its end."""

    async def read_now(received: dict[str, str]) -> Read:
        return read(received)

    steps = follow(subscription, read_now, **options)
    try:
        while True:
            try:
                yield _completed(steps.__anext__())
            except StopAsyncIteration:
                return
    finally:
        _completed(steps.aclose())


def _completed(awaitable):
    """The result of an awaitable that completes without suspending."""
    coroutine = awaitable.__await__()
    try:
        coroutine.send(None)
    except StopIteration as finished:
        return finished.value
    coroutine.close()
    raise RuntimeError("a blocking follow suspended: it needs a BlockingSubscription and a plain read")
