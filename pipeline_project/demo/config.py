"""The demo's names and settings, kept here rather than in the project's settings: everything the
demo makes carries one of these names, so ``demo --remove`` finds exactly what it made."""

import os
from pathlib import Path

SITE_DIR = Path(__file__).resolve().parent / "site"
SITE_PATH = "/demo/site/"  # where the service serves SITE_DIR (pipeline_project/urls.py)
PREFIX = "demo"

# What `make run` serves on (runservice's WEB_BIND): the demo source's start page is there.
DEFAULT_BASE_URL = f"http://{os.environ.get('WEB_BIND', '127.0.0.1:8000')}"

SOURCE_NAME = "demo: Riverton Water Board"
QUEUES = ("demo-etl", "demo-reports")
SCHEDULE_NAME = "demo.tracking-tick"
SCHEDULE_INTERVAL_SEC = 10
NAMESPACE = "demo"
PROCESS_IDS = ("demo-order-1", "demo-order-2", "demo-order-broken")
TRACKING_FILES = ("demo-20250101000000", "demo-20250101010000", "demo-20250101020000")
TRACKING_SHARDS = (0, 1, 2)
PRODUCER = "demo"  # dl_jobs.producer of the jobs the demo enqueues itself
IDEMPOTENCY_PREFIX = "demo:"

# The prepared database state: a psql script given on stdin (no file to place under
# SQLRS_SCRIPT_ROOTS); its first line marks the prepare job as the demo's.
STATE_IMAGE = "postgres:latest"
STATE_SQL = """-- pipeline control plane demo
CREATE TABLE readings (meter int, taken_on date, litres int);
INSERT INTO readings SELECT n % 50, date '2025-01-01' + n / 50, 100 + n % 37 FROM generate_series(0, 9999) AS n;
CREATE INDEX ON readings (meter, taken_on);
"""
