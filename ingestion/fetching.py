"""Fetching what a source links to, within its limits: http(s) only, hosts on the source's
list, a bounded number of redirects (each one checked), timeouts, and a size limit enforced
while the body streams in (a server that lies about Content-Length is cut off too)."""

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import httpx
from django.conf import settings

MAX_REDIRECTS = 5
CHUNK = 64 * 1024


class FetchError(Exception):
    """The URL cannot be fetched within the rules (the message says why, briefly)."""


@dataclass(frozen=True)
class Fetched:
    url: str  # after redirects
    content_type: str
    size: int
    sha256: str


def allowed_hosts(start_url: str, listed: list[str]) -> set[str]:
    return {host.lower().rstrip(".") for host in listed} or {urlsplit(start_url).hostname or ""}


def _check(url: str, hosts: set[str]) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise FetchError(f"not an http(s) URL: {url[:200]}")
    if (parts.hostname or "").rstrip(".") not in hosts:
        raise FetchError(f"host {parts.hostname} is not allowed for this source")


@contextmanager
def _response(url: str, hosts: set[str]) -> Iterator[httpx.Response]:
    """The final response after at most MAX_REDIRECTS checked redirects."""
    timeout = httpx.Timeout(settings.INGESTION_FETCH_TIMEOUT_SEC)
    with httpx.Client(timeout=timeout, follow_redirects=False) as client:
        for _hop in range(MAX_REDIRECTS + 1):
            _check(url, hosts)
            try:
                with client.stream("GET", url, headers={"User-Agent": settings.INGESTION_USER_AGENT}) as response:
                    if response.is_redirect:
                        url = urljoin(url, response.headers.get("location", ""))
                        continue
                    if response.status_code >= 400:
                        raise FetchError(f"HTTP {response.status_code} from {url[:200]}")
                    yield response
                    return
            except httpx.HTTPError as exc:
                raise FetchError(f"{type(exc).__name__} fetching {url[:200]}") from None
        raise FetchError(f"more than {MAX_REDIRECTS} redirects")


def fetch_to(url: str, path: Path, *, hosts: set[str], max_bytes: int) -> Fetched:
    """Stream ``url`` into ``path`` (written whole or not at all), with its sha256."""
    digest, size = hashlib.sha256(), 0
    partial = path.with_name(path.name + ".part")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with _response(url, hosts) as response, partial.open("wb") as out:
            for chunk in response.iter_bytes(CHUNK):
                size += len(chunk)
                if size > max_bytes:
                    raise FetchError(f"larger than {max_bytes} bytes")
                digest.update(chunk)
                out.write(chunk)
            final_url, content_type = str(response.url), response.headers.get("content-type", "")
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
    return Fetched(final_url, content_type.split(";")[0].strip().lower(), size, digest.hexdigest())


def fetch_text(url: str, *, hosts: set[str], max_bytes: int) -> tuple[str, str]:
    """A page's final URL and text (decoded as the server says, else UTF-8 with replacement)."""
    body = bytearray()
    with _response(url, hosts) as response:
        for chunk in response.iter_bytes(CHUNK):
            body += chunk
            if len(body) > max_bytes:
                raise FetchError(f"larger than {max_bytes} bytes")
        encoding = response.charset_encoding or "utf-8"
        final_url = str(response.url)
    try:
        return final_url, body.decode(encoding, errors="replace")
    except LookupError:  # an encoding Python does not know
        return final_url, body.decode("utf-8", errors="replace")


class _Links(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.links: list[tuple[str, str]] = []  # (href, label)
        self._open: list[str] | None = None
        self._href = ""

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self._href = dict(attrs).get("href") or ""
            self._open = []

    def handle_data(self, data):
        if self._open is not None:
            self._open.append(data)

    def handle_endtag(self, tag):
        if tag == "a" and self._open is not None:
            self.links.append((self._href, " ".join("".join(self._open).split())[:500]))
            self._open = None


def links_of(html: str, base_url: str) -> list[tuple[str, str]]:
    """Absolute http(s) links of a page with their labels, each URL once, in page order."""
    parser = _Links()
    parser.feed(html)
    seen, links = set(), []
    for href, label in parser.links:
        url = urljoin(base_url, href.strip()).split("#")[0]
        if urlsplit(url).scheme in ("http", "https") and url not in seen:
            seen.add(url)
            links.append((url, label))
    return links
