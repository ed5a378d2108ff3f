"""What the client's tests share: tokens, a worker, the CLI as a subprocess, and transports that
lose answers or answer from a script."""

import json
import os
import subprocess
import sys
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import httpx
from pipeline_client import Client

from jobs.queue.models import Worker
from pipeline_project.core import services
from tests.e2e.conftest import runworker
from tests.helpers import wait_for

CLI = str(Path(sys.executable).parent / "pipeline-client")  # the console script the package installs


def token(*scopes: str) -> str:
    """A new token's key: the default scopes (read, write) unless ``scopes`` are named."""
    _token, key = services.api_token_create(name=f"client-{'-'.join(scopes) or 'default'}", scopes=list(scopes) or None)
    return key


def client(url: str, key: str, **options) -> Client:
    return Client(url, key, **{"timeout": 30.0, "retries": 2, "backoff": 0.01, **options})


@contextmanager
def worker(*queues: str):
    """A runworker process on ``queues`` (one job at a time each) with the test handlers, once registered."""
    with runworker(*(argument for queue in queues for argument in ("--queue", f"{queue}:1"))) as process:
        wait_for(
            lambda: process.poll() is not None or Worker.objects.filter(pid=process.pid).exists(),
            timeout=60,
            what="the worker to register",
        )
        assert process.poll() is None, process.stdout.read()
        yield process


def run_cli(*args: str, url: str, key: str | None, timeout: float = 60) -> subprocess.CompletedProcess:
    """``pipeline-client ARGS`` with PIPELINE_URL and PIPELINE_TOKEN set."""
    env = {**os.environ, "PIPELINE_URL": url}
    env.pop("PIPELINE_TOKEN", None)
    if key is not None:
        env["PIPELINE_TOKEN"] = key
    return subprocess.run([CLI, *args], env=env, capture_output=True, text=True, timeout=timeout, check=False)


def json_lines(text: str) -> list:
    return [json.loads(line) for line in text.splitlines() if line]


class LoseFirstAnswer(httpx.BaseTransport):
    """A real transport whose first answer is lost on the way back: the service did the work, the
    caller sees a broken connection (``httpx.ReadError``). ``requests`` are what was sent."""

    def __init__(self, inner: httpx.BaseTransport):
        self.inner = inner
        self.requests: list[httpx.Request] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        response = self.inner.handle_request(request)
        if len(self.requests) > 1:
            return response
        response.read()
        response.close()
        raise httpx.ReadError("the connection broke before the answer arrived", request=request)

    def close(self) -> None:
        self.inner.close()


class Scripted(httpx.MockTransport):
    """Answers from a list, one an request: an ``httpx.Response``, an exception to raise, or a
    callable of the request. ``requests`` are what was sent."""

    def __init__(self, *answers: httpx.Response | Exception | Callable[[httpx.Request], httpx.Response]):
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []
        super().__init__(self._answer)

    def _answer(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer(request) if callable(answer) else answer


def error(status: int, code: str, *, retry_after: str | None = None) -> httpx.Response:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return httpx.Response(status, json={"code": code, "message": f"{code}.", "details": {}}, headers=headers)
