"""How a runtime process is known to the others: its name in leases, events and logs, and the
advisory lock its listening session holds. It imports nothing of the runtime, so that the services
that read them (``jobs.queue.services.workers_without_session``, ``workers_gone``) load none of it."""

import os
import socket
import uuid


def worker_session_key(worker_id: uuid.UUID) -> int:
    """The advisory lock a worker's listening session holds while it lives, which is exactly as
    long as the worker's process: a held one says the worker is alive
    (``jobs.queue.services.workers_without_session``)."""
    return int.from_bytes(worker_id.bytes[:8], "big", signed=True)


def worker_name(worker_id: uuid.UUID, *, hostname: str | None = None, pid: int | None = None) -> str:
    """How a worker process names itself in leases, events and logs (this process unless
    ``hostname`` and ``pid`` name another)."""
    return process_name(str(worker_id)[:8], hostname=hostname, pid=pid)


def process_name(suffix: str, *, hostname: str | None = None, pid: int | None = None) -> str:
    """How a runtime process names itself: host, pid, and what tells its roles apart."""
    return f"{hostname or socket.gethostname()}:{pid or os.getpid()}:{suffix}"
