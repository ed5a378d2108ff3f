"""The state store on disk: its layout, snapshots, markers and build locks (seed 1.5, 7.1).

    <root>/engines/<engine>/<version>/base              initdb output, one per image
    <root>/engines/<engine>/<version>/states/<state_id> immutable snapshots
    <root>/jobs/<job_id>/runtime                        a prepare job's working server
    <root>/instances/<instance_id>                      an instance's server

A directory is complete only once its marker (``.init.ok`` for a base, ``.build.ok`` for a
state) exists; the marker is written last, after the files are synced. Builders of one
target hold an exclusive ``flock`` on ``<target>.lock`` (released by the kernel if the
builder dies); a waiting builder returns as soon as the marker appears.
"""

import fcntl
import os
import shutil
import subprocess
import threading
import time
from contextlib import contextmanager, suppress
from pathlib import Path

from django.conf import settings

INIT_MARKER = ".init.ok"
BUILD_MARKER = ".build.ok"
LOCK_POLL_SEC = 0.02


class Stopped(Exception):
    """The work was stopped from outside (its job was canceled, or its worker lost the job)."""


def root() -> Path:
    return Path(settings.SQLRS_STATE_STORE)


def engine_dir(version: str) -> Path:
    return root() / "engines" / "postgres" / version


def base_dir(version: str) -> Path:
    return engine_dir(version) / "base"


def state_dir(version: str, state_id: str) -> Path:
    return engine_dir(version) / "states" / state_id


def job_dir(job_id: str) -> Path:
    return root() / "jobs" / job_id


def job_runtime_dir(job_id: str) -> Path:
    return job_dir(job_id) / "runtime"


def instance_dir(instance_id: str) -> Path:
    return root() / "instances" / instance_id


def is_complete(directory: Path, marker: str) -> bool:
    """Complete: the marker is there, the data directory has PG_VERSION and no server left a pid file."""
    return (directory / marker).is_file() and (directory / "PG_VERSION").is_file() and not is_dirty(directory)


def is_dirty(directory: Path) -> bool:
    """Files a clean snapshot cannot have: a postmaster.pid (a server ran or died here) or no PG_VERSION."""
    return directory.exists() and ((directory / "postmaster.pid").exists() or not (directory / "PG_VERSION").is_file())


def refuse_runtime_inside_states(runtime: Path) -> None:
    """A server must never run inside an immutable state directory (it would change the snapshot)."""
    states = root() / "engines"
    resolved = runtime.resolve()
    if resolved.is_relative_to(states.resolve()) and "states" in resolved.relative_to(states.resolve()).parts:
        raise ValueError(f"runtime directory {runtime} is inside the immutable state store")


def snapshot(source: Path, target: Path) -> None:
    """Copy a stopped data directory (``copy`` backend): thin on copy-on-write file systems."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    remove(partial)
    subprocess.run(["cp", "-a", "--reflink=auto", str(source), str(partial)], check=True, capture_output=True)
    for leftover in (INIT_MARKER, BUILD_MARKER, "postmaster.pid", "postmaster.opts", "server.log"):
        (partial / leftover).unlink(missing_ok=True)
    partial.rename(target)


def write_marker(directory: Path, marker: str) -> None:
    """Sync the directory's files, then write the marker: the marker is only ever seen after them."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.syncfs(fd) if hasattr(os, "syncfs") else os.sync()
    finally:
        os.close(fd)
    (directory / marker).write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))


def remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
    if path.exists():  # a file, or a tree rmtree could not take: let the error say why
        shutil.rmtree(path) if path.is_dir() else path.unlink()


def size_bytes(path: Path) -> int:
    total = 0
    for directory, _dirs, files in os.walk(path):
        for name in files:
            with suppress(FileNotFoundError):  # removed meanwhile
                total += os.lstat(os.path.join(directory, name)).st_size
    return total


@contextmanager
def build_lock(target: Path, *, done, stop: threading.Event | None = None):
    """Hold the exclusive build lock of ``target``; yields False if ``done()`` became true while
    waiting (another builder finished: nothing to build), True when this caller must build."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_name(target.name + ".lock"), "a+") as lock_file:
        while True:
            if done():
                yield False
                return
            try:
                fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if stop is not None and stop.wait(LOCK_POLL_SEC):
                    raise Stopped(f"stopped waiting for the build of {target.name}") from None
                if stop is None:
                    time.sleep(LOCK_POLL_SEC)
        try:
            yield not done()
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)
