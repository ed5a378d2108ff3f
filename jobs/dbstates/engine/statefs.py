"""The state store on disk: its layout, snapshots, markers and build locks (seed 1.5, 7.1).

    <root>/engines/<engine>/<version>/base              initdb output, one per image
    <root>/engines/<engine>/<version>/states/<state_id> immutable snapshots
    <root>/jobs/<job_id>/runtime                        a prepare job's working server
    <root>/instances/<instance_id>                      an instance's server

A directory is complete only once its marker (``.init.ok`` for a base, ``.build.ok`` for a
state) is valid; the marker is written last, and is valid for the boot it was written in until
the file system has been synced (``markers_make_durable``), for good after. Builders of one
target hold an exclusive ``flock`` on ``<target>.lock`` (released by the kernel if the
builder dies); a waiting builder returns as soon as the marker appears.
"""

import ctypes
import fcntl
import functools
import json
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
    """Complete: a valid marker, PG_VERSION, and no pid file a server left."""
    return _marker_valid(directory / marker) and (directory / "PG_VERSION").is_file() and not is_dirty(directory)


def is_dirty(directory: Path) -> bool:
    """Files a clean snapshot cannot have: a postmaster.pid (a server ran or died here) or no PG_VERSION."""
    return directory.exists() and ((directory / "postmaster.pid").exists() or not (directory / "PG_VERSION").is_file())


def refuse_runtime_inside_states(runtime: Path) -> None:
    """A server must never run inside an immutable state directory (it would change the snapshot)."""
    states = root() / "engines"
    resolved = runtime.resolve()
    if resolved.is_relative_to(states.resolve()) and "states" in resolved.relative_to(states.resolve()).parts:
        raise ValueError(f"runtime directory {runtime} is inside the immutable state store")


def data_dir_copy(source: Path, target: Path) -> None:
    """Copy a stopped data directory (``copy`` backend): thin on copy-on-write file systems."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    remove(partial)
    subprocess.run(["cp", "-a", "--reflink=auto", str(source), str(partial)], check=True, capture_output=True)
    for leftover in (INIT_MARKER, BUILD_MARKER, "postmaster.pid", "postmaster.opts", "server.log"):
        (partial / leftover).unlink(missing_ok=True)
    partial.rename(target)


@functools.cache
def boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""  # no way to tell boots apart: markers count only once durable


def write_marker(directory: Path, marker: str) -> None:
    """Mark a directory complete, not yet durable: its files may still be in the page cache only.
    Such a marker is valid until the machine restarts (its boot id); ``markers_make_durable``
    syncs the file system and makes it valid for good. So a build does not wait for the disk,
    and a crash before the sync leaves a state that is rebuilt, never a torn one used."""
    (directory / marker).write_text(json.dumps({"boot": boot_id(), "durable": False, "at": time.time()}))


def _marker_valid(path: Path) -> bool:
    try:
        written = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(written, dict):
        return False
    return written.get("durable") is True or (bool(written.get("boot")) and written.get("boot") == boot_id())


def _syncfs(path: Path) -> None:
    """syncfs(2): flush the one file system ``path`` is on (Python's os has only sync)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        if ctypes.CDLL(None, use_errno=True).syncfs(fd) != 0:
            raise OSError(ctypes.get_errno(), "syncfs failed", str(path))
    finally:
        os.close(fd)


def markers_make_durable() -> int:
    """Sync the store's file system once, then mark every complete-but-not-durable base and
    state durable. Returns how many it marked."""
    pending = []
    for path in (*root().glob(f"engines/*/*/base/{INIT_MARKER}"), *root().glob(f"engines/*/*/states/*/{BUILD_MARKER}")):
        try:
            written = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(written, dict) and not written.get("durable") and written.get("boot") == boot_id():
            pending.append((path, written))
    if not pending:
        return 0
    _syncfs(root())
    for path, written in pending:
        temporary = path.with_name(path.name + ".tmp")
        temporary.write_text(json.dumps({**written, "durable": True}))
        temporary.replace(path)
    return len(pending)


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
