"""Subprocesses that die with their run: real child processes, no database."""

import os
import subprocess
import sys
import threading
import time

import pytest

from jobs.runtime.signals import RunSignals
from jobs.runtime.subprocesses import child, run_subprocess

SLEEPER = [sys.executable, "-c", "import time; time.sleep(30)"]


def test_a_subprocess_runs_to_the_end_with_its_output_and_input():
    done = run_subprocess(
        [sys.executable, "-c", "import sys; print(sys.stdin.read().upper())"],
        stop=RunSignals().stopped,
        input=b"hello",
        stdout=subprocess.PIPE,
    )

    assert (done.returncode, done.stdout) == (0, b"HELLO\n")


@pytest.mark.parametrize("signal_it", [RunSignals.request_cancel, RunSignals.lose_lease])
def test_a_subprocess_is_killed_as_soon_as_the_run_is_signalled(signal_it):
    signals = RunSignals()
    threading.Timer(0.2, signal_it, args=(signals,)).start()
    started = time.monotonic()

    done = run_subprocess(SLEEPER, stop=signals.stopped)

    assert done.returncode < 0  # killed
    assert time.monotonic() - started < 1.5


def test_a_chatty_subprocess_never_blocks_on_a_full_pipe():
    chatty = [sys.executable, "-c", "print('x' * 1_000_000)"]
    done = run_subprocess(chatty, stop=threading.Event(), stdout=subprocess.PIPE)

    assert len(done.stdout) == 1_000_001


def test_timeout_kills_and_raises_as_subprocess_run_does():
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run_subprocess(SLEEPER, stop=threading.Event(), timeout=0.3)
    assert time.monotonic() - started < 1.5


def test_a_streaming_reader_sees_the_end_of_output_when_the_child_is_killed():
    stop = threading.Event()
    script = "import sys, time\nprint('first', flush=True)\ntime.sleep(30)"
    with child([sys.executable, "-c", script], stop=stop, stdout=subprocess.PIPE, text=True) as running:
        assert running.process.stdout.readline() == "first\n"
        stop.set()
        assert running.process.stdout.read() == ""  # EOF: the kill ends the stream
    assert running.stopped and running.process.returncode < 0


def test_a_child_left_running_when_its_block_ends_is_killed_and_reaped():
    with child(SLEEPER, stop=threading.Event()) as running:
        pid = running.process.pid

    assert running.process.returncode is not None and not running.killed
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # reaped: no zombie is left behind


def test_a_child_that_ends_on_its_own_is_not_killed_after():
    stop = threading.Event()
    with child([sys.executable, "-c", "pass"], stop=stop) as running:
        running.process.wait()
    stop.set()
    time.sleep(0.2)

    assert running.process.returncode == 0 and not running.killed
