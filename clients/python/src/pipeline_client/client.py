"""The client: one connection pool to the service, its jobs and its tracking."""

from typing import Self

import httpx

from pipeline_client.jobs import Jobs
from pipeline_client.session import Session
from pipeline_client.tracking import Tracking


class Client:
    """``Client(base_url, token)``: ``base_url`` is where the service is served, with a path prefix
    if it has one (``http://host/pipeline-control/``); ``token`` a key from ``manage.py apitoken
    create``. ``timeout`` bounds each read and connect (a followed event stream waits as long as
    the service holds it); ``retries`` and ``backoff`` (the first wait, doubled each time) are the
    retry policy of :mod:`pipeline_client.session`. ``transport``: httpx's, for tests and proxies.
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 30.0,
        retries: int = 3,
        backoff: float = 0.5,
        transport: httpx.BaseTransport | None = None,
    ):
        self.session = Session(base_url, token, timeout=timeout, retries=retries, backoff=backoff, transport=transport)
        self.jobs = Jobs(self.session)
        self.tracking = Tracking(self.session)

    def close(self) -> None:
        self.session.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
