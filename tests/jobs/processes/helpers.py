import threading
from contextlib import contextmanager

from django.db import connections

import tests.jobs.processes.processors  # noqa: F401  (registers the test.* namespaces)
from jobs.registry import registry
from jobs.worker import WorkerConfig, build_worker

FAST = {"heartbeat_sec": 0.2, "reaper_period_sec": 0.2, "sweep_sec": 60.0, "shutdown_timeout_sec": 5.0}


@contextmanager
def serving(namespaces=None, **overrides):
    """A runtime serving process namespaces in a thread of the test process, stopped on exit."""
    config = WorkerConfig.from_settings(
        {}, namespaces=namespaces or {"test.scripted": 4, "test.quick": 2}, **{**FAST, **overrides}
    )
    worker = build_worker(config, registry)
    thread = threading.Thread(target=worker.run, name="test-process-worker", daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        worker.request_stop()
        thread.join(timeout=30)
        assert not thread.is_alive(), "the worker did not stop"


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
