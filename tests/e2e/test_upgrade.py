"""A release rolled out under load (bench/upgrade.py at a small rate): the previous release's
fleet, this release's migrations, workers and web server beside it, the old stopped. Nothing
stalls, is lost, runs twice or fails against the new schema."""

import pytest

from tests.e2e.benches import bench_report

pytestmark = pytest.mark.slow


def test_the_previous_release_upgraded_under_load_loses_nothing_stalls_nothing_and_logs_no_error(tmp_path):
    report = bench_report("upgrade.py", tmp_path, "--clean-sec", "4", "--recovery-sec", "4")

    assert report["offered"] > 1000
    assert (report["lost"], report["repeated"], report["two outcomes"]) == (0, 0, 0)
    assert report["late pickups"] == 0 and report["longest pickup s"] < 1.0
    assert report["longest wait behind a migration s"] < 1.0
    assert report["errors logged"] == {"old": [], "new": []}
    rollout = report["rollout"]
    assert "jobs.0018_worker_version" in rollout["migrations applied"]["default"]
    assert rollout["lock waits given up"] >= 1  # behind the bench's long reader, then tried again
    assert rollout["old exit codes"] == [0]  # the old worker finished what they ran and left
    assert report["migration locks on queue tables"] == {}
