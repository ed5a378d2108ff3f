"""The engine's servers when the service stops: stopped cleanly (a fast shutdown: a checkpoint,
then exit), so the next start of each finds it shut down, not crashed, and an instance comes
back on demand from its data directory (``services.instance_server_ensure``, when a run asks).

- :func:`started_servers_stop`: a ``runworker`` process's last step (``worker`` registers it with
  the runtime's ``at_exit``), after its drain: the servers it started. Without it, a worker that
  is PID 1 of a container takes them down with SIGKILL as it exits (the kernel kills what is left
  in the container), and one outside a container leaves them running (their own sessions: a
  Ctrl-C at the terminal does not reach them).
- :func:`store_servers_stop`: ``manage.py sqlrsservers stop`` (``make db-stop``): the servers left
  running under the state store by processes that are gone (killed, or stopped before this
  existed) or by the web server (which starts an instance's server again when a run asks).

A server is signalled only once its pid file names a live ``postgres`` working in that data
directory (``postgres.running``), and nothing is killed: a server still shutting down at the
deadline is left to finish.
"""

import logging
import time
from pathlib import Path

from jobs.dbstates.engine import postgres, statefs

log = logging.getLogger("pipeline.dbstates")

STORE_STOP_TIMEOUT_SEC = 30.0
# Where servers run in the state store: instances, and a prepare job's step runtime and planning
# copy (``executor._workspaces``); only a live postgres working in the directory is signalled.
SERVER_DIRS = ("instances/*", "jobs/*/*")


def started_servers_stop(*, deadline: float) -> dict:
    """Stop the servers this process started that still run, side by side, waiting for them
    until ``deadline`` (``time.monotonic()``). Returns the counts stopped and left shutting down."""
    data_dirs = postgres.started()
    if not data_dirs:
        return {"stopped": 0, "left": 0}
    return _stop(data_dirs, deadline=deadline, whose="started by this process")


def store_servers_stop(*, timeout_sec: float = STORE_STOP_TIMEOUT_SEC) -> dict:
    """Stop every server running under the state store, side by side, waiting for them at most
    ``timeout_sec``. Returns the counts stopped and left shutting down."""
    return _stop(store_server_dirs(), deadline=time.monotonic() + timeout_sec, whose="left in the state store")


def store_server_dirs() -> list[Path]:
    """The data directories under the state store whose pid file names a running server."""
    root = statefs.root()
    found = (pid_file.parent for pattern in SERVER_DIRS for pid_file in root.glob(f"{pattern}/postmaster.pid"))
    return sorted(data_dir for data_dir in found if postgres.running(data_dir) is not None)


def _stop(data_dirs: list[Path], *, deadline: float, whose: str) -> dict:
    started = time.monotonic()
    stopped, left = postgres.stop_all(data_dirs, deadline=deadline)
    extra = {"whose": whose, "stopped": len(stopped), "seconds": round(time.monotonic() - started, 3)}
    if stopped:
        log.info("stopped database-state servers (fast shutdown)", extra=extra)
    if left:
        names = [str(data_dir) for data_dir in left]
        log.warning("database-state servers still shutting down at the deadline", extra={**extra, "servers": names})
    return {"stopped": len(stopped), "left": len(left)}
