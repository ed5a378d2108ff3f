"""Run signals: cancel and lease-lost as events, no database."""

from jobs.runtime.signals import RunSignals


def test_either_signal_sets_stopped_and_says_why():
    canceled, lost = RunSignals(), RunSignals()
    canceled.request_cancel()
    lost.lose_lease()

    assert canceled.stopped.is_set() and canceled.canceled and not canceled.lease_lost
    assert lost.stopped.is_set() and lost.lease_lost and not lost.canceled
    assert RunSignals(cancel_requested=True).stopped.is_set()
    assert not RunSignals().stopped.is_set()
