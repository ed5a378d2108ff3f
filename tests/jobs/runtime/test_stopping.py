"""A worker process's stop: the exit hooks get what is left of the stop's time, or ``EXIT_SEC``
when the block ended without one (it raised)."""

import os
import signal
import time

import pytest

from jobs.runtime import stopping


@pytest.fixture(autouse=True)
def signal_handlers_kept():
    """``stopping_on_signals`` installs its handlers for the rest of the process: put pytest's back."""
    kept = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    yield
    for signum, handler in kept.items():
        signal.signal(signum, handler)


def test_after_a_stop_the_exit_hooks_get_its_deadline_less_the_margin():
    deadlines, stop_at = [], time.monotonic() + 5.0

    with stopping.stopping_on_signals(lambda: stop_at, at_exit=lambda *, deadline: deadlines.append(deadline)):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)  # the handler runs between bytecodes of this thread

    assert deadlines == [stop_at - stopping.EXIT_MARGIN_SEC]


def test_a_block_that_raises_still_takes_its_last_steps():
    deadlines = []

    with (
        pytest.raises(RuntimeError),
        stopping.stopping_on_signals(lambda: 0.0, at_exit=lambda *, deadline: deadlines.append(deadline)),
    ):
        before = time.monotonic()
        raise RuntimeError("the loop broke")

    assert len(deadlines) == 1 and before + stopping.EXIT_SEC <= deadlines[0] <= time.monotonic() + stopping.EXIT_SEC
