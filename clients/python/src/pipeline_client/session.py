"""One HTTP connection pool to the service, with its token, and the retry policy every call shares.

A call is retried, with a growing wait, after a connection error and after 429 or 503 (their
``Retry-After`` is the wait, at most ``MAX_RETRY_AFTER_SEC``), ``retries`` times at most. Only
idempotent calls are retried after an error that may have reached the service: a request that
is not (a claim) is retried only when it surely was not sent, or was refused unprocessed (429).
"""

import logging
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import httpx

from pipeline_client.errors import ConnectionFailedError, error_of

logger = logging.getLogger("pipeline_client")

RETRIED_STATUSES = (429, 503)
MAX_BACKOFF_SEC = 30.0
MAX_RETRY_AFTER_SEC = 60.0
# Failures after which the service may have run the request, and those where it never got it.
RETRIED_FAILURES = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)
NEVER_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


class Session:
    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float,
        retries: int,
        backoff: float,
        transport: httpx.BaseTransport | None = None,
    ):
        # httpx joins a relative path under base_url's own path, with or without a trailing slash.
        self.http = httpx.Client(
            base_url=base_url,
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
            timeout=timeout,
            transport=transport,
        )
        self.retries = retries
        self.backoff = backoff

    def close(self) -> None:
        self.http.close()

    def call(self, method: str, path: str, *, idempotent: bool = True, **request) -> dict | list:
        """The JSON answer of a request (``request``: httpx's ``json``, ``params``), or the error it stands for."""
        response = self._send(lambda: self.http.build_request(method, path, **request), idempotent, stream=False)
        return response.json()

    @contextmanager
    def stream(self, path: str, **request) -> Iterator[httpx.Response]:
        """A GET whose answer is read as it arrives; reading it waits as long as the service holds it open."""
        timeout = httpx.Timeout(self.http.timeout.connect, read=None)
        response = self._send(
            lambda: self.http.build_request("GET", path, timeout=timeout, **request), True, stream=True
        )
        try:
            yield response
        finally:
            response.close()

    def wait_before_retry(self, attempt: int) -> None:
        time.sleep(self._backoff(attempt))

    def _send(self, build: Callable[[], httpx.Request], idempotent: bool, *, stream: bool) -> httpx.Response:
        attempt = 0
        while True:
            attempt += 1
            request = build()
            last = attempt > self.retries
            try:
                response = self.http.send(request, stream=stream)
            except RETRIED_FAILURES as exc:
                if last or not (idempotent or isinstance(exc, NEVER_SENT)):
                    raise ConnectionFailedError(f"{request.method} {request.url}: {exc!r}") from exc
                logger.warning("%s %s failed (%r); retrying", request.method, request.url, exc)
                self.wait_before_retry(attempt)
                continue
            except httpx.TransportError as exc:  # a URL no attempt can reach (an unsupported scheme)
                raise ConnectionFailedError(f"{request.method} {request.url}: {exc!r}") from exc
            if response.is_success:
                return response
            response.read()
            response.close()
            retry_after = _retry_after(response)
            retried = response.status_code in RETRIED_STATUSES and (idempotent or response.status_code == 429)
            if last or not retried:
                raise error_of(response, retry_after=retry_after)
            logger.warning("%s %s answered %s; retrying", request.method, request.url, response.status_code)
            time.sleep(self._backoff(attempt) if retry_after is None else retry_after)

    def _backoff(self, attempt: int) -> float:
        # Jittered, so that daemons turned away together do not come back together.
        return min(self.backoff * 2 ** (attempt - 1), MAX_BACKOFF_SEC) * random.uniform(0.5, 1.0)


def _retry_after(response: httpx.Response) -> float | None:
    """``Retry-After`` in seconds (given as seconds or as an HTTP date), at most ``MAX_RETRY_AFTER_SEC``."""
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = (parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds()
        except (TypeError, ValueError):
            return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_SEC)
