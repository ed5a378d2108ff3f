import threading
import uuid
from contextlib import contextmanager

from django.db import connections

import tests.jobs.processes.processors  # noqa: F401  (registers the test.* namespaces)
from jobs.worker import WorkerConfig
from tests.jobs.helpers import FAST, worker_in_thread


@contextmanager
def serving(namespaces=None, **overrides):
    """A worker runtime serving process namespaces in a thread of the test process, stopped on exit."""
    namespaces = namespaces or {"test.scripted": 4, "test.quick": 2}
    with worker_in_thread(WorkerConfig.from_settings({}, namespaces=namespaces, **{**FAST, **overrides})) as worker:
        yield worker


def thread(target, **kwargs) -> threading.Thread:
    """A started thread running ``target(**kwargs)`` that closes its database connections when done."""

    def run():
        try:
            target(**kwargs)
        finally:
            connections.close_all()

    started = threading.Thread(target=run, daemon=True)
    started.start()
    return started


def new_id() -> str:
    return f"p-{uuid.uuid4().hex[:12]}"
