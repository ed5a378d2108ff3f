"""A primary replaced by its standby under load (bench/chaos.py's failover scenarios, short): the
service given both hosts leaves the old primary on every pool connection and LISTEN connection,
and loses nothing."""

import json
import subprocess
import sys

import pytest

from tests.e2e.conftest import ROOT

pytestmark = pytest.mark.slow


def chaos(tmp_path, *scenarios: str) -> dict[str, dict]:
    report_file = tmp_path / "chaos.json"
    command = [sys.executable, "bench/chaos.py", "--rate", "200", "--warmup-sec", "3", "--clean-sec", "3"]
    command += ["--recovery-sec", "8", "--fault-sec", "4", "--json", str(report_file)]
    command += [argument for scenario in scenarios for argument in ("--scenario", scenario)]
    bench = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert bench.returncode == 0, bench.stdout + bench.stderr
    return {report["scenario"]: report for report in json.loads(report_file.read_text())}


def test_a_primary_fenced_read_only_under_the_service_is_left_for_the_promoted_standby(tmp_path):
    report = chaos(tmp_path, "read-only")["read-only"]

    assert report["fault"]["old primary in recovery"] is True  # it came back as the standby
    assert report["fault"]["told enqueued, missing"] == 0
    assert (report["lost"], report["two outcomes"]) == (0, 0)
    assert report["back after s"] is not None and report["back after s"] <= 10
    assert report["tracebacks"] == 0
