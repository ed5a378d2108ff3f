"""`make run` in a terminal: Ctrl-C stops the web server and the worker, and everything exits 0 quietly."""

import fcntl
import os
import subprocess
import termios
import threading
import time
from pathlib import Path

from tests.conftest import ALL_DATABASES_COMMITTED
from tests.db_helpers import subprocess_database_env
from tests.e2e.servers import answers
from tests.helpers import free_port, wait_for

pytestmark = ALL_DATABASES_COMMITTED

ROOT = Path(__file__).resolve().parents[3]


def _own_terminal():
    """In the child: its pseudo-terminal (stdin) as the controlling terminal of its new session."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def test_ctrl_c_stops_make_run_cleanly_and_quietly():
    port = free_port()
    master, terminal = os.openpty()
    env = {
        **os.environ,
        **subprocess_database_env(),
        "WEB_BIND": f"127.0.0.1:{port}",
        "WEB_WORKERS": "1",
        "DL_SHUTDOWN_TIMEOUT_SEC": "5",
        "LOG_LEVEL": "WARNING",
    }
    make = subprocess.Popen(
        ["make", "--no-print-directory", "-o", "setup", "run"],  # -o setup: installed and migrated already
        cwd=ROOT,
        env=env,
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
        start_new_session=True,
        preexec_fn=_own_terminal,  # noqa: PLW1509 - one ioctl (TIOCSCTTY) in the child: Popen has no option for it
    )
    os.close(terminal)
    output = bytearray()
    reader = threading.Thread(target=_read_all, args=(master, output), daemon=True)
    reader.start()
    try:
        wait_for(lambda: answers(port), timeout=60, what="the web server")
        time.sleep(1)  # the worker is up too
        os.write(master, b"\x03")  # Ctrl-C, as typed: the terminal sends SIGINT to its foreground group
        returncode = make.wait(timeout=60)
    finally:
        if make.poll() is None:
            os.killpg(make.pid, 9)
        reader.join(timeout=5)
        os.close(master)

    text = output.decode(errors="replace")
    assert returncode == 0, text
    for noise in ("Error", "Interrupt", "rc=", "Traceback", "make: ***"):
        assert noise not in text, text
    assert not answers(port)


def _read_all(fd: int, into: bytearray) -> None:
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # the terminal closed
            return
        if not chunk:
            return
        into.extend(chunk)
