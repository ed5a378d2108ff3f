"""A benchmark of bench/ run as a test: short, small, its JSON report read back."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# One worker and one web worker per fleet, at 200 jobs/s: what the suite can afford of each bench.
SMALL = ("--rate", "200", "--workers", "1", "--web-workers", "1", "--warmup-sec", "3")


def bench_report(script: str, tmp_path: Path, *arguments: str):
    """``bench/<script>`` with SMALL and ``arguments``; the report it wrote with ``--json``."""
    report_file = tmp_path / "report.json"
    command = [sys.executable, f"bench/{script}", *SMALL, *arguments, "--json", str(report_file)]
    bench = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert bench.returncode == 0, bench.stdout + bench.stderr
    return json.loads(report_file.read_text())
