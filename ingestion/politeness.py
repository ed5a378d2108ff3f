"""Crawling politely, across every worker thread and process: the state lives in PostgreSQL.

- **Per-host limit**: a request holds one of its host's slots (``ingestion_host_slots``: a row per
  host and slot, taken with ``FOR UPDATE SKIP LOCKED``) from its start to the end of its body; a
  source's requests use the first ``max_concurrent_per_host`` slots. A holder that died lets its
  slot go when the lease (renewed while the body streams) lapses.
- **Delay**: a request of a source starts only once ``ingestion_source_pace`` says the source's
  next request is due, and claims that start in the same statement, which sets the next one a
  delay later; others wait until then (and try again: one of them gets it).
- **robots.txt**: fetched once per origin and kept in ``ingestion_robots_txt`` for every worker,
  read as RFC 9309 says (Protego: the longest matching rule wins, ``*`` and ``$`` patterns;
  urllib.robotparser takes the first match, so a Google-style ``Allow`` after a ``Disallow`` is
  lost). 2xx is parsed; 3xx after five redirects and 4xx allow everything; 5xx and an
  unreachable host disallow everything, and are asked again sooner.

Every wait ends at once when ``stop`` (the job's stop event) is set: ``ingestion.stopping.Stopped``.
"""

import datetime
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache

from django.conf import settings
from django.db.models.functions import Now
from django.utils import timezone
from protego import Protego

from ingestion.models import RobotsTxt
from ingestion.stopping import NEVER, Stopped
from pipeline_project.db import sql

POLL_SEC = 0.1  # how soon a waiting request sees a freed slot


class HostBusy(Exception):
    """No slot of the host came free within INGESTION_HOST_WAIT_SEC."""


@dataclass
class Turn:
    """A request's slot at a host, renewed while its body streams."""

    host: str
    slot: int
    holder: str
    started_at: datetime.datetime | None = None  # when the source's pace let it start (the database's clock)
    renew_at: float = field(default_factory=lambda: time.monotonic() + settings.INGESTION_HOST_SLOT_TTL_SEC / 3)

    def renew_if_due(self) -> None:
        if time.monotonic() >= self.renew_at:
            sql.execute(
                "UPDATE ingestion_host_slots SET expires_at = clock_timestamp() + %(ttl)s * interval '1 second' "
                "WHERE host = %(host)s AND slot = %(slot)s AND holder = %(holder)s",
                {
                    "ttl": settings.INGESTION_HOST_SLOT_TTL_SEC,
                    "host": self.host,
                    "slot": self.slot,
                    "holder": self.holder,
                },
            )
            self.renew_at = time.monotonic() + settings.INGESTION_HOST_SLOT_TTL_SEC / 3


@contextmanager
def host_turn(
    *, host: str, limit: int, source_id: int | None, delay_sec: float, stop: threading.Event = NEVER
) -> Iterator[Turn]:
    """One request's turn: a free slot of ``host`` among the first ``limit`` (waiting for one),
    then the source's next start time (waiting for it). The slot is held until the block ends."""
    holder = f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}:{uuid.uuid4().hex[:8]}"
    slot = _take_slot(host, limit, holder, stop)
    try:
        started_at = _start_when_due(source_id, delay_sec, stop) if source_id is not None else None
        yield Turn(host, slot, holder, started_at)
    finally:
        sql.execute(
            "UPDATE ingestion_host_slots SET holder = NULL, expires_at = NULL "
            "WHERE host = %(host)s AND slot = %(slot)s AND holder = %(holder)s",
            {"host": host, "slot": slot, "holder": holder},
        )


_TAKE = """
UPDATE ingestion_host_slots SET holder = %(holder)s, expires_at = clock_timestamp() + %(ttl)s * interval '1 second'
WHERE id = (
    SELECT id FROM ingestion_host_slots
    WHERE host = %(host)s AND slot < %(limit)s AND (holder IS NULL OR expires_at < clock_timestamp())
    ORDER BY slot LIMIT 1 FOR UPDATE SKIP LOCKED
)
RETURNING slot
"""


def _take_slot(host: str, limit: int, holder: str, stop: threading.Event) -> int:
    params = {"host": host, "limit": limit, "holder": holder, "ttl": settings.INGESTION_HOST_SLOT_TTL_SEC}
    deadline = time.monotonic() + settings.INGESTION_HOST_WAIT_SEC
    created = False
    while True:
        if taken := sql.rows(_TAKE, params):
            return taken[0][0]
        if not created:  # a host's slots are made the first time it is asked for them
            sql.execute(
                "INSERT INTO ingestion_host_slots (host, slot) SELECT %(host)s, generate_series(0, %(limit)s - 1) "
                "ON CONFLICT (host, slot) DO NOTHING",
                params,
            )
            created = True
            continue
        if time.monotonic() >= deadline:
            raise HostBusy(f"no free slot at {host} within {settings.INGESTION_HOST_WAIT_SEC:g} s")
        if stop.wait(POLL_SEC):
            raise Stopped("stopped while waiting for a free slot")


_CLAIM_START = """
WITH claimed AS (
    INSERT INTO ingestion_source_pace AS p (source_id, next_request_at)
    VALUES (%(source)s, clock_timestamp() + %(delay)s * interval '1 second')
    ON CONFLICT (source_id) DO UPDATE SET next_request_at = clock_timestamp() + %(delay)s * interval '1 second'
    WHERE p.next_request_at <= clock_timestamp()
    RETURNING next_request_at - %(delay)s * interval '1 second' AS started_at
)
SELECT (SELECT started_at FROM claimed),
       (SELECT extract(epoch FROM next_request_at - clock_timestamp()) FROM ingestion_source_pace
        WHERE source_id = %(source)s)  -- NULL if another request made the row after this statement began
"""


def _start_when_due(source_id: int, delay_sec: float, stop: threading.Event) -> datetime.datetime:
    """Wait until the source's next request may start, and claim that start (returned): the claim
    sets the next one ``delay_sec`` later, so two requests never start closer (by the database's
    clock; the request is sent right after the claim, so nothing but that statement's way back
    lies between)."""
    while True:
        started_at, wait = sql.rows(_CLAIM_START, {"source": source_id, "delay": delay_sec})[0]
        if started_at is not None:
            return started_at
        if stop.wait(max(float(wait or 0), 0.0)):
            raise Stopped("stopped while waiting for the crawl delay")


# --- robots.txt ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Robots:
    """What an origin's robots.txt allows our User-Agent."""

    origin: str
    status_code: int | None  # None: unreachable
    body: str

    def allows(self, url: str) -> bool:
        if self.status_code is None or self.status_code >= 500:
            return False
        if not 200 <= self.status_code < 300:
            return True
        return _parsed(self.body).can_fetch(url, settings.INGESTION_USER_AGENT)

    def crawl_delay(self) -> float:
        """Its Crawl-delay for us (0 if none), at most INGESTION_MAX_CRAWL_DELAY_SEC."""
        if self.status_code is None or not 200 <= self.status_code < 300:
            return 0.0
        try:
            delay = float(_parsed(self.body).crawl_delay(settings.INGESTION_USER_AGENT) or 0)
        except ValueError:
            return 0.0
        return min(max(delay, 0.0), settings.INGESTION_MAX_CRAWL_DELAY_SEC)

    def why_not(self) -> str:
        if self.status_code is None or self.status_code >= 500:
            answer = "could not be fetched" if self.status_code is None else f"answered HTTP {self.status_code}"
            return f"{self.origin}/robots.txt {answer}: nothing is fetched from the host until it can be read"
        return f"disallowed by {self.origin}/robots.txt"


@lru_cache(maxsize=64)
def _parsed(body: str) -> Protego:
    return Protego.parse(body)


def robots_cached(origin: str) -> Robots | None:
    row = RobotsTxt.objects.filter(origin=origin, expires_at__gt=Now()).first()
    return None if row is None else Robots(origin, row.status_code, row.body)


def robots_store(origin: str, status_code: int | None, body: str) -> Robots:
    """Keep what the origin answered, for every worker, as long as RFC 9309 suggests."""
    unreachable = status_code is None or status_code >= 500
    ttl = settings.INGESTION_ROBOTS_RETRY_SEC if unreachable else settings.INGESTION_ROBOTS_CACHE_SEC
    now = timezone.now()
    RobotsTxt.objects.update_or_create(
        origin=origin,
        defaults={
            "status_code": status_code,
            "body": body,
            "fetched_at": now,
            "expires_at": now + datetime.timedelta(seconds=ttl),
        },
    )
    return Robots(origin, status_code, body)
