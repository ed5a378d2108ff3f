"""A release rolled out under load (bench/upgrade.py at a small rate): the previous release's
fleet, this release's migrations, workers and web server beside it, the old stopped. Nothing
stalls, is lost, runs twice or fails against the new schema."""

import json
import subprocess
import sys

import pytest

from tests.e2e.conftest import ROOT

pytestmark = pytest.mark.slow


def test_the_previous_release_upgraded_under_load_loses_nothing_stalls_nothing_and_logs_no_error(tmp_path):
    report_file = tmp_path / "upgrade.json"
    command = [sys.executable, "bench/upgrade.py", "--rate", "200", "--warmup-sec", "3", "--clean-sec", "4"]
    bench = subprocess.run(
        [*command, "--recovery-sec", "4", "--json", str(report_file)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert bench.returncode == 0, bench.stdout + bench.stderr

    report = json.loads(report_file.read_text())
    assert report["offered"] > 1000
    assert (report["lost"], report["repeated"], report["two outcomes"]) == (0, 0, 0)
    assert report["late pickups"] == 0 and report["longest pickup s"] < 1.0
    assert report["longest wait behind a migration s"] < 1.0
    assert report["errors logged"] == {"old": [], "new": []}
    rollout = report["rollout"]
    assert "jobs.0018_worker_version" in rollout["migrations applied"]["default"]
    assert rollout["lock waits given up"] >= 1  # behind the bench's long reader, then tried again
    assert rollout["old exit codes"] == [0, 0]  # the old workers finished what they ran and left
    assert report["migration locks on queue tables"] == {}
