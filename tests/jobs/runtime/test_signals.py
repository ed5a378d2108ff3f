"""Run signals and the subprocess helper that obeys them: real child processes, no database."""

import subprocess
import sys
import threading
import time

import pytest

from jobs.runtime.signals import RunSignals, run_subprocess


def test_either_signal_sets_stopped_and_says_why():
    canceled, lost = RunSignals(), RunSignals()
    canceled.request_cancel()
    lost.lose_lease()

    assert canceled.stopped.is_set() and canceled.canceled and not canceled.lease_lost
    assert lost.stopped.is_set() and lost.lease_lost and not lost.canceled
    assert RunSignals(cancel_requested=True).stopped.is_set()
    assert not RunSignals().stopped.is_set()


def test_a_subprocess_runs_to_the_end_with_its_output_and_input():
    done = run_subprocess(
        [sys.executable, "-c", "import sys; print(sys.stdin.read().upper())"],
        signals=RunSignals(),
        input=b"hello",
        stdout=subprocess.PIPE,
    )

    assert (done.returncode, done.stdout) == (0, b"HELLO\n")


@pytest.mark.parametrize("signal_it", [RunSignals.request_cancel, RunSignals.lose_lease])
def test_a_subprocess_is_killed_as_soon_as_the_run_is_signalled(signal_it):
    signals = RunSignals()
    threading.Timer(0.2, signal_it, args=(signals,)).start()
    started = time.monotonic()

    done = run_subprocess([sys.executable, "-c", "import time; time.sleep(30)"], signals=signals)

    assert done.returncode < 0  # killed
    assert time.monotonic() - started < 1.5


def test_a_chatty_subprocess_never_blocks_on_a_full_pipe():
    done = run_subprocess(
        [sys.executable, "-c", "print('x' * 1_000_000)"], signals=RunSignals(), stdout=subprocess.PIPE
    )

    assert len(done.stdout) == 1_000_001


def test_timeout_kills_and_raises_as_subprocess_run_does():
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run_subprocess([sys.executable, "-c", "import time; time.sleep(30)"], signals=RunSignals(), timeout=0.3)
    assert time.monotonic() - started < 1.5
