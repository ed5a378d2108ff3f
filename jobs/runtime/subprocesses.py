"""Subprocesses that die with their run: killed as soon as the run is stopped (canceled, its
lease lost) or their time is up, and never left behind.

:func:`child` is the one way: it starts the program and a watcher thread that kills it when
``stop`` is set or the deadline passes, and on leaving the block kills and reaps whatever still
runs. :func:`run_subprocess` is ``subprocess.run`` on it; callers that stream a program's output
(the database states' steps) read from the child's pipes inside the block.
"""

import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

POLL_SEC = 0.05  # how soon a killed-for child notices a stop


@dataclass
class Child:
    process: subprocess.Popen
    stopped: bool = False  # killed because the run was stopped
    timed_out: bool = False  # killed because its time was up
    _ended: threading.Event = field(default_factory=threading.Event)

    @property
    def killed(self) -> bool:
        return self.stopped or self.timed_out


@contextmanager
def child(args, *, stop: threading.Event, timeout: float | None = None, **popen_kwargs) -> Iterator[Child]:
    """``subprocess.Popen(args, **popen_kwargs)``, killed as soon as ``stop`` is set or ``timeout``
    seconds have passed (``killed`` says which), and killed and reaped when the block is left."""
    deadline = None if timeout is None else time.monotonic() + timeout
    started = Child(subprocess.Popen(args, **popen_kwargs))
    threading.Thread(target=_watch, args=(started, stop, deadline), name="child-watch", daemon=True).start()
    with started.process:  # on leaving: closes the pipes and waits for the process
        try:
            yield started
        finally:
            started._ended.set()
            if started.process.poll() is None:
                started.process.kill()


def _watch(started: Child, stop: threading.Event, deadline: float | None) -> None:
    while not started._ended.wait(POLL_SEC):
        if stop.is_set():
            started.stopped = True
        elif deadline is not None and time.monotonic() >= deadline:
            started.timed_out = True
        else:
            continue
        if not started._ended.is_set():
            started.process.kill()  # a no-op once the process has been reaped
        return


def run_subprocess(args, *, stop: threading.Event, timeout: float | None = None, input=None, **popen_kwargs):
    """``subprocess.run`` that kills the child as soon as ``stop`` is set (the run was canceled or
    lost its lease).

    Returns the ``CompletedProcess``; when a stop killed the child, its ``returncode`` is the
    kill's (the caller's ``check_cancelled()`` then says why). ``timeout`` raises
    ``subprocess.TimeoutExpired`` as ``subprocess.run`` does. Output is collected with
    ``communicate``, so a chatty child never blocks on a full pipe.
    """
    stdin = subprocess.PIPE if input is not None else popen_kwargs.pop("stdin", None)
    with child(args, stop=stop, timeout=timeout, stdin=stdin, **popen_kwargs) as running:
        stdout, stderr = running.process.communicate(input)
    if running.timed_out:
        raise subprocess.TimeoutExpired(args, timeout, stdout, stderr)
    return subprocess.CompletedProcess(args, running.process.returncode, stdout, stderr)
