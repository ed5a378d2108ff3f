"""A primary replaced by its standby under load (bench/chaos.py's failover scenarios, short): the
service given both hosts leaves the old primary on every pool connection and LISTEN connection,
and loses nothing."""

import pytest

from tests.e2e.benches import bench_report

pytestmark = pytest.mark.slow


def test_a_primary_fenced_read_only_under_the_service_is_left_for_the_promoted_standby(tmp_path):
    [report] = bench_report(
        "chaos.py", tmp_path, "--scenario", "read-only", "--clean-sec", "3", "--recovery-sec", "8", "--fault-sec", "4"
    )

    assert report["fault"]["old primary in recovery"] is True  # it came back as the standby
    assert report["fault"]["told enqueued, missing"] == 0
    assert (report["lost"], report["two outcomes"]) == (0, 0)
    assert report["back after s"] is not None and report["back after s"] <= 10
    assert report["tracebacks"] == 0
