"""Fetching what a source links to, within its limits and politely: http(s) only, hosts on the
source's list, a bounded number of redirects (each hop checked), timeouts, a size limit enforced
while the body streams in (a server that lies about Content-Length is cut off too), our
User-Agent, the hosts' robots.txt (unless the source ignores it), and every request in its turn
(``ingestion.politeness``: a per-host limit and the source's delay, across all workers).

A :class:`Fetcher` serves one job. When its ``stop`` event is set (the job was canceled or lost
its lease) every request ends at once: its socket is shut down, so even a read blocked on a
silent server returns, and :class:`~ingestion.politeness.Stopped` is raised.
"""

import hashlib
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import httpx
from django.conf import settings

from ingestion import keys, links, politeness
from ingestion.stopping import NEVER, Stopped

MAX_REDIRECTS = 5
CHUNK = 64 * 1024
ROBOTS_MAX_BYTES = 512 * 1024  # RFC 9309: parse at least 500 KiB

__all__ = ["FetchError", "Fetched", "Fetcher", "Rules", "Stopped", "allowed_hosts"]


class FetchError(Exception):
    """The URL cannot be fetched within the rules (the message says why, briefly)."""


@dataclass(frozen=True)
class Fetched:
    url: str  # after redirects
    content_type: str
    size: int
    sha256: str


@dataclass(frozen=True)
class Rules:
    """Where a source may fetch from, how much, and how politely."""

    hosts: frozenset[str]
    max_bytes: int
    source_id: int | None = None  # None: no delay between requests
    obey_robots_txt: bool = True
    max_concurrent_per_host: int = 1
    crawl_delay_sec: float = 0.0

    @classmethod
    def of(cls, source) -> "Rules":
        return cls(
            hosts=frozenset(allowed_hosts(source.start_url, source.allowed_hosts)),
            max_bytes=source.max_bytes,
            source_id=source.id,
            obey_robots_txt=source.obey_robots_txt,
            max_concurrent_per_host=source.max_concurrent_per_host,
            crawl_delay_sec=source.crawl_delay_sec,
        )


def allowed_hosts(start_url: str, listed: list[str]) -> set[str]:
    return {host.lower().rstrip(".") for host in listed} or {(urlsplit(start_url).hostname or "").rstrip(".")}


def origin_of(url: str) -> tuple[str, str]:
    """``(scheme://host[:port], host[:port])`` of an http(s) URL, normalized as item keys are."""
    parts = urlsplit(keys.normalize_url(url))
    authority = parts.netloc.rpartition("@")[2]
    return f"{parts.scheme}://{authority}", authority


class _SocketCutter:
    """Shuts down a fetcher's sockets as soon as its stop event is set, from a thread of its own."""

    def __init__(self, stop: threading.Event):
        self._stop = stop
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="fetch-stop", daemon=True)

    def start(self) -> None:
        if self._stop is not NEVER:
            self._thread.start()

    def close(self) -> None:
        self._done.set()

    def trace(self, event: str, info: dict) -> None:  # httpx's "trace" request extension
        if event == "connection.connect_tcp.complete":
            with self._lock:
                self._sockets.append(info["return_value"].get_extra_info("socket"))
            if self._stop.is_set():
                self._cut()

    def _watch(self) -> None:
        while not self._done.is_set():
            if self._stop.wait(politeness.POLL_SEC):
                self._cut()
                return

    def _cut(self) -> None:
        with self._lock:
            for sock in self._sockets:
                with suppress(OSError):  # closed already
                    sock.shutdown(socket.SHUT_RDWR)


class Fetcher:
    """Fetches for one job within ``rules``; use it as a context manager."""

    def __init__(self, rules: Rules, *, stop: threading.Event = NEVER):
        self.rules = rules
        self._stop = stop
        self._cutter = _SocketCutter(stop)
        self._client = httpx.Client(
            timeout=httpx.Timeout(settings.INGESTION_FETCH_TIMEOUT_SEC),
            follow_redirects=False,
            headers={"User-Agent": settings.INGESTION_USER_AGENT},
            limits=httpx.Limits(max_keepalive_connections=0),  # a connection per request: each one can be cut
        )

    def __enter__(self) -> "Fetcher":
        self._cutter.start()
        return self

    def __exit__(self, *exc) -> None:
        self._cutter.close()
        self._client.close()

    def page(self, url: str) -> tuple[str, str]:
        """A page's final URL and text (its charset from the header, a BOM or a meta tag)."""
        body = bytearray()
        with self._response(url) as (response, turn):
            for chunk in self._chunks(response, turn):
                body += chunk
            final_url, charset = str(response.url), response.charset_encoding
        return final_url, links.decode_html(bytes(body), charset)

    def download(self, url: str, path: Path) -> Fetched:
        """Stream ``url`` into ``path`` (written whole or not at all), with its sha256."""
        digest, size = hashlib.sha256(), 0
        partial = path.with_name(path.name + ".part")
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with self._response(url) as (response, turn), partial.open("wb") as out:
                for chunk in self._chunks(response, turn):
                    size += len(chunk)
                    digest.update(chunk)
                    out.write(chunk)
                final_url, content_type = str(response.url), response.headers.get("content-type", "")
            partial.replace(path)
        finally:
            partial.unlink(missing_ok=True)
        return Fetched(final_url, content_type.split(";")[0].strip().lower(), size, digest.hexdigest())

    def _chunks(self, response: httpx.Response, turn: politeness.Turn) -> Iterator[bytes]:
        """The body, cut off past max_bytes or when the job stops; the slot renewed as it streams."""
        size = 0
        for chunk in response.iter_bytes(CHUNK):
            if self._stop.is_set():
                raise Stopped("stopped while fetching")
            size += len(chunk)
            if size > self.rules.max_bytes:
                raise FetchError(f"larger than {self.rules.max_bytes} bytes")
            turn.renew_if_due()
            yield chunk

    @contextmanager
    def _response(self, url: str) -> Iterator[tuple[httpx.Response, politeness.Turn]]:
        """The final response after at most MAX_REDIRECTS hops, each checked against the rules."""
        for _hop in range(MAX_REDIRECTS + 1):
            origin = self._checked(url)
            robots = self._robots(origin) if self.rules.obey_robots_txt else None
            if robots is not None and not robots.allows(url):
                raise FetchError(f"{robots.why_not()}: {url[:200]}")
            delay = max(self.rules.crawl_delay_sec, robots.crawl_delay() if robots else 0.0)
            with self._request(url, delay) as (response, turn):
                if response.is_redirect:
                    url = urljoin(url, response.headers.get("location", ""))
                    continue
                if response.status_code >= 400:
                    raise FetchError(f"HTTP {response.status_code} from {url[:200]}")
                yield response, turn
                return
        raise FetchError(f"more than {MAX_REDIRECTS} redirects")

    def _checked(self, url: str) -> str:
        """The URL's origin, if it may be fetched at all."""
        try:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https"):
                raise FetchError(f"not an http(s) URL: {url[:200]}")
            origin, host = origin_of(url)[0], (parts.hostname or "").rstrip(".")
        except ValueError:
            raise FetchError(f"not a valid URL: {url[:200]}") from None
        if host not in self.rules.hosts:
            raise FetchError(f"host {host} is not allowed for this source")
        return origin

    @contextmanager
    def _request(self, url: str, delay_sec: float) -> Iterator[tuple[httpx.Response, politeness.Turn]]:
        """One GET in its turn at the host; the slot is held until the response is closed."""
        try:
            with (
                politeness.host_turn(
                    host=origin_of(url)[1],
                    limit=self.rules.max_concurrent_per_host,
                    source_id=self.rules.source_id,
                    delay_sec=delay_sec,
                    stop=self._stop,
                ) as turn,
                self._client.stream("GET", url, extensions={"trace": self._cutter.trace}) as response,
            ):
                yield response, turn
        except httpx.HTTPError as exc:
            if self._stop.is_set():
                raise Stopped("stopped while fetching") from None
            raise FetchError(f"{type(exc).__name__} fetching {url[:200]}") from None
        except politeness.HostBusy as exc:
            raise FetchError(str(exc)) from None

    def _robots(self, origin: str) -> politeness.Robots:
        """The origin's robots.txt: from the shared cache, or fetched (in its turn) and kept."""
        cached = politeness.robots_cached(origin)
        if cached is not None:
            return cached
        return politeness.robots_store(origin, *self._robots_fetched(f"{origin}/robots.txt"))

    def _robots_fetched(self, url: str) -> tuple[int | None, str]:
        """A robots.txt's status and text (None: the host did not answer). A sixth redirect, or
        one off the source's hosts, leaves its 3xx status: unavailable, as RFC 9309 allows."""
        status = None
        for _hop in range(MAX_REDIRECTS + 1):
            try:
                self._checked(url)
            except FetchError:
                return status, ""
            try:
                with self._request(url, self.rules.crawl_delay_sec) as (response, _turn):
                    status = response.status_code
                    if response.is_redirect:
                        url = urljoin(url, response.headers.get("location", ""))
                        continue
                    if not 200 <= status < 300:
                        return status, ""
                    body = bytearray()
                    for chunk in response.iter_bytes(CHUNK):
                        body += chunk
                        if len(body) >= ROBOTS_MAX_BYTES:  # what fits is parsed
                            break
                    return status, body[:ROBOTS_MAX_BYTES].decode("utf-8", errors="replace")
            except FetchError:
                return None, ""
        return status, ""
