"""The resources long-lived responses wait with, per event loop: the notification hub and a small
async connection pool (``pipeline_project.web.notifications`` says how they are used).

The ASGI application opens them once per process (lifespan startup) and closes them at shutdown;
code running where they are not open (an ASGI test client, a WSGI server consuming an async
stream) gets its own for the duration of ``waiting_resources()``.
"""

import asyncio
import weakref
from contextlib import asynccontextmanager
from dataclasses import dataclass

import psycopg
from django.conf import settings
from psycopg_pool import AsyncConnectionPool

from pipeline_project.db.connections import ServerReadOnly, connection_params, takes_writes
from pipeline_project.web.notifications import NotificationHub

POOL_MAX_SIZE = 4


@dataclass
class WaitingResources:
    hub: NotificationHub
    pool: AsyncConnectionPool

    @classmethod
    async def open(cls) -> "WaitingResources":
        pool = AsyncConnectionPool(
            kwargs={**connection_params(), "autocommit": True},
            check=_check_pooled,
            min_size=0,
            max_size=POOL_MAX_SIZE,
            max_idle=settings.DB_POOL_MAX_IDLE_SEC,
            open=False,
        )
        await pool.open()
        return cls(hub=NotificationHub(), pool=pool)

    async def close(self) -> None:
        await self.hub.close()
        await self.pool.close()


async def _check_pooled(conn: psycopg.AsyncConnection) -> None:
    """No round trip: a connection that failed, or whose server no longer takes writes (its reads
    would no longer see what the primary writes), is closed and another one opened."""
    if conn.broken or not takes_writes(conn):
        await conn.close()
        raise ServerReadOnly("the pooled connection failed or its server no longer takes writes")


_shared: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, WaitingResources]" = weakref.WeakKeyDictionary()


async def open_shared_resources() -> None:
    """The ASGI application's lifespan startup: resources for every request of this process."""
    _shared[asyncio.get_running_loop()] = await WaitingResources.open()


async def close_shared_resources() -> None:
    resources = _shared.pop(asyncio.get_running_loop(), None)
    if resources is not None:
        await resources.close()


def end_follows() -> None:
    """End every follow waiting on this loop's shared hub (the web server's shutdown)."""
    resources = shared_resources()
    if resources is not None:
        resources.hub.end()


def shared_resources() -> WaitingResources | None:
    return _shared.get(asyncio.get_running_loop())


@asynccontextmanager
async def waiting_resources():
    """The process's resources if the ASGI application opened them, else ones of our own."""
    shared = shared_resources()
    if shared is not None:
        yield shared
        return
    own = await WaitingResources.open()
    try:
        yield own
    finally:
        await own.close()
