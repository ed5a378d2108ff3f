"""What long-lived responses wait with: a notification hub (and a small async connection pool,
``pipeline_project.web.waiting``).

A client following a job's events (or waiting for a process call, or following an sqlrs job)
holds no thread and no database connection while it waits: it holds a subscription to the
process's :class:`NotificationHub`, which has one LISTEN connection per channel for all of
its subscribers, and borrows a connection from the async pool only to read. How it reads and
waits until done is ``pipeline_project.web.follow``, the same for every stream and waiter.
"""

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Iterable
from contextlib import asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass

import psycopg
from psycopg import sql

from pipeline_project.db.connections import (
    LISTENER_CHECK_SEC,
    LISTENER_CHECK_SQL,
    listen_connection_params,
    listener_checked,
)
from pipeline_project.db.outages import OUTAGES

RECONNECT_AFTER_SEC = (0.1, 0.5, 1.0, 2.0, 5.0)
# Each listener remembers its latest notifications, so that a subscription made just after one
# (its key was known only then) still gets it: see ``Listening``.
RECENT_NOTIFICATIONS = 4096


@dataclass(frozen=True)
class Listening:
    """A listener's position, taken before the caller wrote what will be notified: a
    subscription made later with it (``since``) gets every notification sent after this point,
    from the listener's memory if it came before the subscription; if that cannot be sure (the
    connection was lost, or too much came meanwhile), the subscription is woken to re-read."""

    connection: int
    received: int


class Subscription:
    """Woken when a notification for one of its keys arrives (or the listener reconnects).

    A payload is ``key,key,...`` optionally followed by a newline and data; ``received`` holds
    the data that came for each key (empty if none: re-read).
    """

    def __init__(self):
        self._event = asyncio.Event()
        self.received: dict[str, str] = {}
        self.ended = False  # the server is stopping: a follow waits no more (``NotificationHub.end``)

    def end(self) -> None:
        self.ended = True
        self._wake()

    def wake(self, key: str | None = None, data: str = "") -> None:
        if key is not None:
            self.received[key] = data
        self._wake()

    def _wake(self) -> None:
        self._event.set()

    async def wait(self, timeout: float) -> bool:  # noqa: ASYNC109 - the protocol follow() polls with: False on timeout
        """Wait up to ``timeout`` seconds; return whether something arrived (then re-read)."""
        try:
            await asyncio.wait_for(self._event.wait(), timeout)
        except TimeoutError:
            return False
        self._event.clear()
        return True


class BlockingSubscription(Subscription):
    """A subscription a thread waits on (the hub wakes it from its event loop's thread)."""

    def __init__(self):
        super().__init__()
        self._thread_event = threading.Event()

    def _wake(self) -> None:
        self._thread_event.set()

    async def wait(self, timeout: float) -> bool:  # noqa: ASYNC109 - Subscription.wait's signature
        """Blocks the calling thread: what ``pipeline_project.web.follow.follow_blocking`` waits with."""
        return self.wait_blocking(timeout)

    def wait_blocking(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds; return whether something arrived (then re-read)."""
        woken = self._thread_event.wait(timeout)
        self._thread_event.clear()
        return woken


class _ChannelListener:
    """One connection LISTENing on one channel, waking the subscribers of each key a payload
    names."""

    def __init__(self, channel: str):
        self.channel = channel
        self.subscribers: dict[str, set[Subscription]] = {}
        self.recent: OrderedDict[str, str] = OrderedDict()
        self.connections = 0  # LISTENs established: a change means notifications may have been missed
        self.received = 0  # keys notified
        self._connection: psycopg.AsyncConnection | None = None
        self._reader: asyncio.Task | None = None
        self._ready = asyncio.Event()

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    def position(self) -> Listening:
        return Listening(self.connections, self.received)

    def catch_up(self, keys: list[str], subscription: Subscription, since: Listening) -> None:
        """Wake a new subscription with what came for its keys since ``since`` (a notification
        arrives after it was remembered, or finds the subscription: either way, it is seen)."""
        found = {key: self.recent.get(key) for key in keys}
        # Checked after reading the memory: if it may have forgotten a key meanwhile, re-read.
        if since.connection != self.connections or self.received - since.received >= RECENT_NOTIFICATIONS:
            subscription.wake()
            return
        for key, data in found.items():
            if data is not None:
                subscription.wake(key, data)

    async def start(self) -> None:
        if self._reader is None:
            self._reader = asyncio.create_task(self._read(), name=f"listen:{self.channel}")
        await self._ready.wait()

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with suppress(asyncio.CancelledError, Exception):  # closing: how the reader ended no longer matters
                await self._reader
        if self._connection is not None:
            await self._connection.close()

    def wake_all(self) -> None:
        for subscriptions in list(self.subscribers.values()):
            for subscription in tuple(subscriptions):
                subscription.wake()

    async def _read(self) -> None:
        failures = 0
        while True:
            try:
                self._connection = await psycopg.AsyncConnection.connect(**listen_connection_params(), autocommit=True)
                await self._connection.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
                self.connections += 1
                if failures:
                    self.wake_all()  # notifications may have been missed: every subscriber re-reads
                failures = 0
                self._ready.set()
                while True:
                    async for notify in self._connection.notifies(timeout=LISTENER_CHECK_SEC):
                        self._deliver(notify.payload)
                    await self._check_connection()
                    OUTAGES.answered()
            except psycopg.Error as exc:
                self.connections += 1  # what the lost connection would have brought is unknown
                delay = RECONNECT_AFTER_SEC[min(failures, len(RECONNECT_AFTER_SEC) - 1)]
                failures += 1
                # One line per episode, whatever the number of attempts (as every process logs outages).
                OUTAGES.failed(exc, during=f"the web server's LISTEN on {self.channel}")
                self.wake_all()
                self._ready.set()  # subscribers need not wait for the reconnection: they re-read anyway
                if self._connection is not None:
                    await self._connection.close()
                await asyncio.sleep(delay)

    async def _check_connection(self) -> None:
        """A round trip (a dead connection raises), then whether the server still takes writes: on
        one that does not (fenced read-only, demoted), nothing would be notified again."""
        answer = await (await self._connection.execute(LISTENER_CHECK_SQL)).fetchone()
        listener_checked(self._connection, answer[0])

    def _deliver(self, payload: str) -> None:
        keys, _newline, data = payload.partition("\n")
        for key in keys.split(","):
            self.received += 1
            # Remembered before the subscribers are read, and a new subscription is added
            # before it reads the memory (``catch_up``): one of the two sees the other.
            self.recent[key] = data
            self.recent.move_to_end(key)
            if len(self.recent) > RECENT_NOTIFICATIONS:
                self.recent.popitem(last=False)
            # A copy: threads may add and remove blocking subscriptions meanwhile.
            for subscription in tuple(self.subscribers.get(key, ())):
                subscription.wake(key, data)


class NotificationHub:
    def __init__(self):
        self._listeners: dict[str, _ChannelListener] = {}
        self._ended = False

    async def listening(self, channel: str) -> Listening:
        """Listen on ``channel`` now; the position to subscribe ``since`` after writing."""
        listener = self.listener(channel)
        await listener.start()
        return listener.position()

    @asynccontextmanager
    async def subscribe(self, channel: str, keys: Iterable[str], *, since: Listening | None = None):
        """A :class:`Subscription` to ``keys`` on ``channel``, listening before it is returned, so
        that nothing sent after the caller's next read (or after ``since``) is missed."""
        subscription = Subscription()
        if self._ended:
            subscription.end()
        keys = list(keys)
        listener = self.attach(channel, keys, subscription)
        await listener.start()
        if since is not None:
            listener.catch_up(keys, subscription, since)
        try:
            yield subscription
        finally:
            self.detach(channel, keys, subscription)

    def listener(self, channel: str) -> "_ChannelListener":
        """``channel``'s listener (created, not started, if new)."""
        listener = self._listeners.get(channel)
        if listener is None:
            listener = self._listeners[channel] = _ChannelListener(channel)
        return listener

    def attach(self, channel: str, keys: list[str], subscription: Subscription) -> "_ChannelListener":
        """Add ``subscription`` to ``keys`` of ``channel``'s listener."""
        listener = self.listener(channel)
        for key in keys:
            listener.subscribers.setdefault(key, set()).add(subscription)
        return listener

    def detach(self, channel: str, keys: list[str], subscription: Subscription) -> None:
        listener = self._listeners.get(channel)
        for key in keys:
            subscribers = listener.subscribers.get(key) if listener is not None else None
            if subscribers is not None:
                subscribers.discard(subscription)
                if not subscribers:
                    del listener.subscribers[key]

    def end(self) -> None:
        """The server is stopping: every subscription's follow ends after its current read, and
        so its stream, cleanly (a client following again reaches a server still serving)."""
        self._ended = True
        for listener in self._listeners.values():
            for subscriptions in tuple(listener.subscribers.values()):
                for subscription in tuple(subscriptions):
                    subscription.end()

    async def close(self) -> None:
        for listener in self._listeners.values():
            await listener.close()
        self._listeners.clear()


class _BlockingHub:
    """The hub for threads (the service API, synchronous views): one per process, its event
    loop on a daemon thread of its own, so a thread waiting for a notification holds no
    database connection and every waiter shares one LISTEN connection per channel."""

    def __init__(self):
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._hub: NotificationHub | None = None

    @staticmethod
    def _run(loop: asyncio.AbstractEventLoop) -> None:
        try:
            loop.run_forever()
        finally:
            loop.close()

    def _started(self) -> tuple[asyncio.AbstractEventLoop, NotificationHub]:
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                loop = asyncio.new_event_loop()
                threading.Thread(target=self._run, args=(loop,), name="notification-hub", daemon=True).start()
                self._loop, self._hub = loop, NotificationHub()
            return self._loop, self._hub

    @staticmethod
    def _ensure_listening(loop: asyncio.AbstractEventLoop, listener: "_ChannelListener") -> None:
        if not listener.ready:
            asyncio.run_coroutine_threadsafe(listener.start(), loop).result()

    def listening(self, channel: str) -> Listening:
        """Listen on ``channel`` now; the position to subscribe ``since`` after writing."""
        loop, hub = self._started()
        with self._lock:
            listener = hub.listener(channel)
        self._ensure_listening(loop, listener)
        return listener.position()

    @contextmanager
    def subscribe(self, channel: str, keys: Iterable[str], *, since: Listening | None = None):
        """A :class:`BlockingSubscription`, listening before it is returned (see ``NotificationHub.subscribe``).

        Threads add and remove their subscriptions themselves, under a lock, rather than through
        the loop (no thread hop per wait); the loop only reads them, copying each set it wakes.
        """
        loop, hub = self._started()
        keys = list(keys)
        subscription = BlockingSubscription()
        with self._lock:
            listener = hub.attach(channel, keys, subscription)
        self._ensure_listening(loop, listener)
        if since is not None:
            listener.catch_up(keys, subscription, since)
        try:
            yield subscription
        finally:
            with self._lock:
                hub.detach(channel, keys, subscription)

    def close(self) -> None:
        """Close the LISTEN connections and stop the loop (the next subscription starts anew)."""
        with self._lock:
            loop, hub, self._loop, self._hub = self._loop, self._hub, None, None
        if loop is not None:
            asyncio.run_coroutine_threadsafe(hub.close(), loop).result(timeout=10)
            loop.call_soon_threadsafe(loop.stop)


blocking_hub = _BlockingHub()
