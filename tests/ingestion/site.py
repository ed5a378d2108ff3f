"""A small website for the pipeline's tests, served over HTTP from threads: pages linking to
documents, whose files, answers and speed a test can change while it runs, and a log of every
request it received (path, User-Agent, when it started and ended, how many were in flight)."""

import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from string import Template

from pipeline_project.demo import site_build

PAGES = Path(__file__).parent / "pages"
INDEX = """<html><body>
<a href="/docs/text.pdf">Annual report</a>
<a href="/docs/scan.png">Scanned letter</a>
<a href="/docs/missing.pdf">Broken link</a>
<a href="/docs/empty.pdf">Empty form</a>
<a href="/about.html">About us</a>
<a href="http://elsewhere.invalid/other.pdf">Elsewhere</a>
</body></html>"""
TEXT = "The annual report of the ministry describes public spending on roads and schools."


def pdf(text: str | None) -> bytes:
    """A one-page PDF, with ``text`` in its text layer (Helvetica), or blank."""
    return site_build.pdf((text,) if text else ())


@cache
def png_of_text(*lines: str, width: int = 1400, size: int = 44) -> bytes:
    return site_build.scan(lines, width=width, size=size, paper=255, ink=0, blur=0)


def page(name: str, **values) -> str:
    """A page of tests/ingestion/pages with its $placeholders filled in."""
    return Template((PAGES / name).read_text(encoding="utf-8")).substitute(values)


def default_files() -> dict[str, tuple[str, bytes]]:
    return {
        "/index.html": ("text/html; charset=utf-8", INDEX.encode()),
        "/about.html": ("text/html", b"<p>about</p>"),
        "/docs/text.pdf": ("application/pdf", pdf(TEXT)),
        "/docs/scan.png": (
            "image/png",
            png_of_text("Scanned letter from the city council", "about parking in the old town"),
        ),
        "/docs/empty.pdf": ("application/pdf", pdf(None)),
    }


@dataclass
class Request:
    path: str
    user_agent: str
    started: float  # time.monotonic()
    ended: float | None = None
    cut_off: bool = False  # the client went away before the body was sent


class Site:
    def __init__(self):
        self.files = default_files()
        self.redirects: dict[str, str] = {}
        self.statuses: dict[str, int] = {}  # path → an error status to answer
        self.delays: dict[str, float] = {}  # path → seconds before the answer (in flight meanwhile)
        self.trickle: dict[str, tuple[int, float]] = {}  # path → (bytes, seconds): the body sent that slowly
        self.requests: list[Request] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        self.base_url = ""

    def url(self, path: str) -> str:
        return self.base_url + path

    def requested(self, path: str) -> list[Request]:
        return [request for request in self.requests if request.path == path]

    def _begin(self, request: Request) -> None:
        with self.lock:
            self.requests.append(request)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _end(self, request: Request) -> None:
        with self.lock:
            request.ended = time.monotonic()
            self.in_flight -= 1


@contextmanager
def serving():
    site = Site()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            request = Request(self.path, self.headers.get("User-Agent", ""), time.monotonic())
            site._begin(request)
            try:
                self._answer(request)
            except (BrokenPipeError, ConnectionResetError):
                request.cut_off = True
            finally:
                site._end(request)

        def _answer(self, request: Request) -> None:
            time.sleep(site.delays.get(self.path, 0))
            if self.path in site.redirects:
                self.send_response(302)
                self.send_header("Location", site.redirects[self.path])
                self.end_headers()
                return
            found = site.files.get(self.path)
            if self.path in site.statuses or found is None:
                self.send_error(site.statuses.get(self.path, 404))
                return
            content_type, body = found
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            size, pause = site.trickle.get(self.path, (len(body) or 1, 0))
            for start in range(0, len(body), size):
                self.wfile.write(body[start : start + size])
                self.wfile.flush()
                time.sleep(pause)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    site.base_url = f"http://127.0.0.1:{server.server_port}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()
