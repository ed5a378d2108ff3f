"""Big tables: every admin page, /pipeline page and API read against a year-in-production-sized
data set, at 50,000 jobs and at full size, side by side.

    .venv/bin/python bench/big_tables.py                     # seed 50k, time; seed full, time; compare
    .venv/bin/python bench/big_tables.py seed --scale 0.02   # (re)create and seed the databases only
    .venv/bin/python bench/big_tables.py time --rounds 20    # time the seeded databases only
    .venv/bin/python bench/big_tables.py --shape recent --scale 0.4  # jobs of another shape (job_shapes.py)

Seeding (``seed``) drops and recreates ``<prefix>_control`` and ``<prefix>_pipeline`` (prefix
``big``, or BENCH_DB_PREFIX) on the configured server, migrates them, and fills them in SQL,
set-based (INSERT ... SELECT over generate_series, a statement per table and chunk of about a day
or 100,000 processes), at ``--scale`` times these sizes (the longest journal, the biggest run and
the longest history scale too):

- dl_jobs 10,000,000 over the last 30 days (UUIDv7 ids matching created_at; about 1 % queued in
  20 queues, 2.5 % failed with tracebacks, those whose run had not ended running, the rest
  succeeded) and dl_job_events about 40,000,000 (queued, picked, heartbeat, then done, failed or
  requeue per attempt, with the worker's payloads); one job with 1,000 events;
- 2,000 ingestion runs with 5,000,000 items (one run with 100,000), each item with the job that
  wrote it (discover, download, ocr: about half of dl_jobs, args holding their run_id);
- 1,000,000 durable processes with 20,000,000 events (one with 10,000), their tasks and timers;
- pipeline_tracking 5,000,000 rows (1,000,000 files x 5 shards; the newest waiting at each stage);
- 1,000 schedules, 8 workers, 3 queues' limits, the periodic tasks' rows.

Values come from hashes of row numbers (reproducible), times from the moment seeding started (so
time soon after seeding: the dashboard shows the last hour). Two lanes run at once: jobs and their
events (alone: rows must land in created_at order, as the BRIN indexes expect); ingestion,
processes and tracking. The schema stays exactly as migrated (every index kept; helpers are
pg_temp functions and temporary tables). A big INSERT skips its table's triggers and foreign key
checks (session_replication_role = replica; the rows reference each other correctly by
construction) only when those triggers just NOTIFY; any other trigger (the ingestion items'
stats, a count table) runs, so that what it maintains holds. Each phase ends with ANALYZE, the
seed with VACUUM (ANALYZE) of every table (as autovacuum would have by then; it does not start
while timing). The ids timing needs are kept in the control database's comment.

Timing (``time``) migrates the databases (a newer checkout's migrations apply), starts the deployed
web command on them (gunicorn, one uvicorn worker: every request on the same warm process) and
requests each endpoint over a keep-alive connection: pages with a superuser's session cookie, APIs
with a Bearer token; 3 warm-ups, then ``--rounds`` requests, each answer read whole; median and p95
in ms. Every answer must be
200 (an endpoint this checkout does not have shows n/a). Targets: pages p95 <= 300 ms, APIs,
/metrics and /status p95 <= 100 ms, and the full size's p95 within 1.5x of the 50k one's.
"""

import argparse
import http.client
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlencode

# Before common reads it: the databases are big_control and big_pipeline unless BENCH_DB_PREFIX says.
os.environ.setdefault("BENCH_DB_PREFIX", "big")
os.environ.setdefault("LOG_LEVEL", "WARNING")

import psycopg
from common import (
    BENCH_DATABASES,
    PYTHON,
    bench_connection,
    bench_env,
    create_bench_databases,
    gunicorn,
    migrate_bench_databases,
    server_params,
    use_bench_databases,
)
from psycopg import sql
from seeded_namespaces import NAMESPACES

from ingestion.stats import empty_stats  # importable once common put the project on sys.path

SMALL_SCALE = 0.005  # 50,000 jobs
FULL_SIZES = {
    "jobs": 10_000_000,
    "job_events": 40_000_000,  # not set directly: about 4 per job follow from the jobs' runs
    "big_job_events": 1_000,
    "tracking_files": 1_000_000,
    "runs": 2_000,
    "items": 5_000_000,
    "big_run_items": 100_000,
    "processes": 1_000_000,
    "process_events": 20_000_000,
    "big_process_events": 10_000,
    "schedules": 1_000,
    "audit_entries": 1_000_000,  # operator actions: a busy year's, several times over
}
MINIMUM_SIZES = {"runs": 2, "big_job_events": 5, "big_run_items": 10, "big_process_events": 10}
FULL_SIZE_BYTES = 35 * 10**9  # a full seed on disk: about 50 x what scale 0.02 took (0.7 GB)
SPAN = timedelta(days=30)
BACKOFF = timedelta(seconds=30)  # between a failed attempt and the next
SHARDS = 5
SOURCES = 50
JOBS_PER_CHUNK = 350_000
PROCESSES_PER_CHUNK = 100_000
PAGE_P95_MS, API_P95_MS, GROWTH_LIMIT = 300, 100, 1.5
WARMUPS = 3
BIG_TABLES = {
    "default": [
        "dl_jobs",
        "dl_job_events",
        "ingestion_items",
        "dl_processes",
        "dl_proc_tasks",
        "dl_proc_events",
        "audit_entries",
    ],
    "pipeline": ["pipeline_tracking"],
}


def sizes_at(scale: float) -> dict[str, int]:
    return {name: max(MINIMUM_SIZES.get(name, 1), round(full * scale)) for name, full in FULL_SIZES.items()}


# --- what the rows say ---------------------------------------------------------------------------

# queue, task, weight, mean run time (s), kind of args, max_attempts. With the ingestion pipeline's
# own queue ("ingest": discover, download, ocr) they make 20 queues.
TASKS = [
    ("reports", "reports.daily", 3, 40, "report", 3),
    ("reports", "reports.weekly_digest", 1, 90, "report", 3),
    ("reports.export", "reports.export_csv", 2, 120, "export", 3),
    ("ingest.ocr", "ocr.page", 10, 8, "page", 5),
    ("ingest.crawl", "ingest.discover", 4, 20, "file", 5),
    ("billing.invoices", "billing.send_invoice", 6, 2, "invoice", 5),
    ("billing.invoices", "billing.render_invoice", 4, 4, "invoice", 5),
    ("billing.payments", "billing.capture_payment", 4, 1.5, "payment", 8),
    ("emails", "emails.send", 14, 0.8, "email", 5),
    ("notifications.push", "notifications.push", 12, 0.3, "push", 3),
    ("thumbnails", "media.thumbnail", 8, 1.2, "media", 3),
    ("search.index", "search.reindex_document", 8, 0.6, "document", 5),
    ("etl.load", "etl.load_partition", 4, 45, "file", 5),
    ("etl.transform", "etl.transform_batch", 4, 30, "file", 5),
    ("webhooks", "webhooks.deliver", 8, 0.5, "webhook", 10),
    ("exports", "exports.customer_archive", 1, 300, "export", 3),
    ("ml.scoring", "ml.score_batch", 2, 60, "batch", 3),
    ("sync.crm", "sync.crm_contacts", 2, 15, "crm", 5),
    ("maintenance", "maintenance.prune_tmp", 1, 5, "none", 1),
    ("audit", "audit.compact_log", 1, 25, "none", 3),
    ("default", "accounts.tasks.send_digest", 3, 1.5, "django", 5),
]
INGEST_QUEUE = "ingest"
SLOTS = 1000  # a job's task: the slot its hash falls in, slots shared out by weight

# exception class, first line (format(): %s are a number and a file), the line that raised
ERRORS = [
    ("TimeoutError", "TimeoutError: read timed out after %s s", "response = session.get(url, timeout=30)"),
    (
        "psycopg.errors.UniqueViolation",
        'psycopg.errors.UniqueViolation: duplicate key value violates unique constraint "invoices_number_key"'
        "\nDETAIL:  Key (number)=(INV-%s) already exists.",
        "cursor.execute(INSERT_INVOICE, row)",
    ),
    ("ValueError", "ValueError: bad row %s in file %s", "record = parse_row(line)"),
    (
        "requests.exceptions.HTTPError",
        "requests.exceptions.HTTPError: 503 Server Error: Service Unavailable for url: https://api.partner.example/v2/orders/%s",
        "response.raise_for_status()",
    ),
    ("ConnectionResetError", "ConnectionResetError: [Errno 104] Connection reset by peer", "sock.sendall(payload)"),
    ("KeyError", "KeyError: 'customer_id'", "customer = row['customer_id']"),
    (
        "botocore.exceptions.ClientError",
        "botocore.exceptions.ClientError: An error occurred (SlowDown) when calling the PutObject operation "
        "(reached max retries: 4): Please reduce your request rate.",
        "s3.put_object(Bucket=bucket, Key=key, Body=body)",
    ),
    ("OSError", "OSError: [Errno 28] No space left on device", "out.write(chunk)"),
    (
        "subprocess.TimeoutExpired",
        "subprocess.TimeoutExpired: Command '['tesseract', 'page-%s.png', '-']' timed out after 300 seconds",
        "text = ctx.run_subprocess(command, timeout=300)",
    ),
    (
        "smtplib.SMTPRecipientsRefused",
        "smtplib.SMTPRecipientsRefused: {'user%s@example.com': (550, b'5.1.1 mailbox unavailable')}",
        "smtp.send_message(message)",
    ),
    (
        "psycopg.errors.QueryCanceled",
        "psycopg.errors.QueryCanceled: canceling statement due to statement timeout",
        "cursor.execute(LOAD_PARTITION, params)",
    ),
    (
        "TimeoutError",
        "TimeoutError: timeout waiting for lock on partition %s",
        "with partition_lock(partition, timeout=60):",
    ),
]
DOCUMENT_ERRORS = [
    "HTTP 404 Not Found",
    "HTTP 503 Service Unavailable",
    "read timed out after 30 s",
    "larger than max_bytes (20971520 bytes)",
]
OCR_ERRORS = [
    "pdftotext exited with 1: Syntax Error: Couldn't find trailer dictionary",
    "tesseract timed out after 300 s",
    "not a PDF: the file starts with <!DOCTYPE html>",
]
ORGANISATIONS = [
    ("Ministry of Finance", "finance.gov.example"),
    ("Statistics Office", "stats.example.org"),
    ("City Council", "council.example.net"),
    ("Court Registry", "registry.courts.example"),
    ("Energy Regulator", "energy-regulator.example.eu"),
    ("Health Institute", "health-institute.example.org"),
    ("Land Survey", "landsurvey.example.gov"),
    ("Central Bank", "centralbank.example"),
]
WORKER_HOSTS = [f"worker-{zone}-{number}.prod.internal" for zone in "ab" for number in range(1, 5)]
PERIODIC_TASKS = [
    "ingestion.settle",
    "jobs.forget_workers",
    "jobs.reap",
    "jobs.retention",
    "jobs.statistics",
    "jobs.vacuum",
    "processes.zombies",
    "schedules.enqueue",
]
CRONS = ["*/5 * * * *", "0 * * * *", "15 3 * * *", "0 6 * * 1-5", "30 2 1 * *", "*/15 8-18 * * 1-5"]
TIMEZONES = ["UTC", "Europe/Prague", "America/New_York", "Asia/Tokyo"]


def workers() -> list[dict]:
    """The dl_workers rows: id, host, pid, and the name a worker writes in events."""
    rows = []
    for number, host in enumerate(WORKER_HOSTS):
        worker_id = f"{number + 1:08x}-7e57-4b1d-9a5e-{number + 1:012x}"
        rows.append(
            {
                "id": worker_id,
                "host": host,
                "pid": 4100 + 37 * number,
                "name": f"{host}:{4100 + 37 * number}:{worker_id[:8]}",
            }
        )
    return rows


# --- SQL helpers of the seeding session ----------------------------------------------------------

# Session-local (pg_temp) functions: they leave the schema as migrated.
HELPERS = """
-- A number in [0, 1) from a hash of n and salt: the hash's top 53 bits (its low bits are not as
-- evenly spread for small n).
CREATE FUNCTION pg_temp.h(n bigint, salt int) RETURNS float8 IMMUTABLE LANGUAGE sql
AS $$ SELECT ((hashint8extended(n, salt) >> 11) & 9007199254740991)::float8 / 9007199254740992.0 $$;

-- A UUIDv7 as jobs.queue.models.uuid7 makes it: 48-bit Unix milliseconds of ts, version 7, variant
-- 10, the other bits from a hash of seed (reproducible).
-- (One expression, no FROM, as volatile as its parts: the planner inlines it.)
CREATE FUNCTION pg_temp.uuid7(ts timestamptz, seed bigint) RETURNS uuid STABLE LANGUAGE sql AS $$
SELECT (lpad(to_hex(floor(extract(epoch FROM ts) * 1000)::bigint), 12, '0') || '7'
        || lpad(to_hex(hashint8extended(seed, 71) & 4095), 3, '0')
        || to_hex(8 + (hashint8extended(seed, 72) & 3)) || lpad(to_hex(hashint8extended(seed, 73) & 1152921504606846975), 15, '0'))::uuid
$$;

-- A job's status at t0 from when its (last) attempt started and ended.
CREATE FUNCTION pg_temp.job_status(t0 timestamptz, started timestamptz, ended timestamptz, failed boolean)
RETURNS text IMMUTABLE LANGUAGE sql
AS $$ SELECT CASE WHEN started > t0 THEN 'queued' WHEN ended > t0 THEN 'running' WHEN failed THEN 'failed'
                  ELSE 'succeeded' END $$;
"""
SESSION_SETTINGS = [
    "SET temp_buffers = '1GB'",  # before the first temporary table: the plans stay in memory
    "SET synchronous_commit = off",
    "SET maintenance_work_mem = '512MB'",
    "SET work_mem = '256MB'",
    "SET jit = off",
    "SET TimeZone = 'UTC'",
]


def seeding_connection(params: dict, alias: str) -> psycopg.Connection:
    """An autocommit connection to a bench database with the seeding session's settings and helpers."""
    conn = bench_connection(params, alias, autocommit=True)
    for statement in SESSION_SETTINGS:
        conn.execute(statement)
    conn.execute(HELPERS)
    return conn


# What pgtrigger wraps every trigger's body in (the ignore check), left out when reading the body.
PGTRIGGER_IGNORE = re.compile(r"IF \(.*?_pgtrigger_should_ignore\(TG_NAME\) IS TRUE\) THEN.*?END IF;\s*END IF;", re.S)
WRITES_OR_RAISES = re.compile(r"\b(INSERT|UPDATE|DELETE|TRUNCATE|RAISE)\b", re.I)
TRIGGERS_SQL = """
SELECT t.tgname, p.prosrc FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid
WHERE t.tgrelid = %s::regclass AND NOT t.tgisinternal AND t.tgenabled <> 'D' AND t.tgtype & 4 <> 0
"""
_announced: set[str] = set()


def bulk_insert(conn: psycopg.Connection, table: str, statement: str, params: dict | None = None) -> None:
    """A big INSERT into ``table``, with its triggers and foreign key checks skipped
    (session_replication_role = replica) when its INSERT triggers only NOTIFY (no listener here;
    the rows reference each other correctly by construction); with every trigger and check when
    one does more (a count, a stats row, a guard), so that what it keeps stays true."""
    others = [
        name
        for name, body in conn.execute(TRIGGERS_SQL, [table])
        if "pg_notify" not in body or WRITES_OR_RAISES.search(PGTRIGGER_IGNORE.sub("", body))
    ]
    if others and table not in _announced:
        _announced.add(table)
        print(f"    {table}: triggers {', '.join(others)} run while seeding", flush=True)
    conn.execute(f"SET session_replication_role = {'origin' if others else 'replica'}")
    try:
        conn.execute(statement, params)
    finally:
        conn.execute("SET session_replication_role = origin")


def analyze(conn: psycopg.Connection, *tables: str) -> None:
    for table in tables:
        conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(table)))


def time_params(t0: datetime) -> dict:
    return {"t0": t0, "start": t0 - SPAN, "span": SPAN, "backoff": BACKOFF}


# --- small tables --------------------------------------------------------------------------------


def seed_small_tables(conn: psycopg.Connection, t0: datetime) -> None:
    """Workers, operator state of three queues, the periodic tasks' rows, the ingestion sources."""
    for worker in workers():
        concurrency = {queue: 4 for queue, *_rest in TASKS} | {INGEST_QUEUE: 8}
        conn.execute(
            "INSERT INTO dl_workers (worker_id, hostname, pid, queues, started_at, heartbeat_at, running_jobs) "
            "VALUES (%s, %s, %s, %s, %s, %s, 0)",
            [worker["id"], worker["host"], worker["pid"], json.dumps(concurrency), t0 - timedelta(days=2), t0],
        )
    conn.execute(
        """
        INSERT INTO dl_queues (name, paused, max_running, rate_limit, rate_period_sec, limit_per_partition, changed_at, changed_by)
        VALUES ('exports', true, NULL, NULL, NULL, false, %(t0)s - interval '2 hours', 'ops.oncall'),
               ('billing.payments', false, 4, NULL, NULL, false, %(t0)s - interval '9 days', 'admin'),
               ('webhooks', false, NULL, 100, 60, true, %(t0)s - interval '20 days', 'admin')
        """,
        {"t0": t0},
    )
    conn.execute(
        """
        INSERT INTO dl_periodic_tasks (name, last_started_at, last_finished_at, last_runner, last_result)
        SELECT name, %(t0)s - interval '7 s', %(t0)s - interval '6.9 s', %(runner)s, '{"ok": true}'
        FROM unnest(%(names)s::text[]) AS name
        """,
        {"t0": t0, "runner": workers()[0]["name"], "names": PERIODIC_TASKS},
    )
    conn.execute(
        """
        INSERT INTO ingestion_sources (id, name, start_url, enabled, allowed_hosts, max_documents, max_bytes,
                                       obey_robots_txt, max_concurrent_per_host, crawl_delay_sec, created_at)
        SELECT i, o.name || ' ' || i, 'https://' || o.host || '/publications/' || i || '/', true, '[]', 50000,
               20971520, true, 2, 1.0, %(t0)s - interval '120 days'
        FROM generate_series(1, %(sources)s) AS i
        CROSS JOIN LATERAL (SELECT (%(names)s::text[])[1 + mod(i, 8)] AS name, (%(hosts)s::text[])[1 + mod(i, 8)] AS host) AS o
        """,
        {
            "t0": t0,
            "sources": SOURCES,
            "names": [name for name, _host in ORGANISATIONS],
            "hosts": [host for _name, host in ORGANISATIONS],
        },
    )
    conn.execute(f"SELECT setval(pg_get_serial_sequence('ingestion_sources', 'id'), {SOURCES})")


# --- ingestion runs and items --------------------------------------------------------------------

# One row per run: its times (items take 1.5 s per document; the run ends 130 s after its last
# document started), whether its items fail at all (flaky), whether an operator canceled it.
RUNS_PLAN = """
CREATE TEMP TABLE runs_plan AS
SELECT x.*, md5('ingestion-run-' || x.r)::uuid AS id, 1 + mod(x.r * 7, %(sources)s) AS source_id,
       x.c + interval '2 s' AS s, make_interval(secs => x.triplets * 1.5) AS dur,
       x.c + interval '132 s' + make_interval(secs => x.triplets * 1.5) AS ends,
       x.r <> %(big)s AND pg_temp.h(x.r, 31) < 0.2 AS flaky,
       x.r <> %(big)s AND pg_temp.h(x.r, 32) < 0.01 AS canceled,
       pg_temp.uuid7(x.c, 2000000000000 + x.r) AS discover_job
FROM (
    SELECT w.r, w.c,
           CASE WHEN w.r = %(big)s THEN %(big_triplets)s
                ELSE greatest(1, round(%(other_triplets)s * w.f / sum(w.f) FILTER (WHERE w.r <> %(big)s) OVER ()))::int
           END AS triplets
    FROM (
        SELECT r, %(start)s + %(span)s * ((r - 0.5) / %(runs)s::float8) AS c, 0.25 + 1.5 * pg_temp.h(r, 30) AS f
        FROM generate_series(1, %(runs)s) AS r
    ) AS w
) AS x
"""

# One row per document of a run (a "triplet": its link found by discovery, its download, its OCR),
# with the times and fates of each step. k: the document's number for hashes and job ids.
TRIPLETS = """
CREATE TEMP TABLE trip AS
SELECT rp.r, rp.id AS run_id, rp.source_id, rp.discover_job, t, y.*, z.*, ocr.*,
       pg_temp.uuid7(y.link_ts, 1000000000000 + 4 * y.k + 1) AS download_job,
       pg_temp.uuid7(z.doc_end, 1000000000000 + 4 * y.k + 2) AS ocr_job
FROM runs_plan rp
JOIN ingestion_sources src ON src.id = rp.source_id
CROSS JOIN generate_series(1, rp.triplets) AS t
CROSS JOIN LATERAL (
    SELECT rp.r::bigint * 1000000 + t AS k,
           rp.s + rp.dur * (0.02 * t / rp.triplets)::float8 AS link_ts,
           rp.s + rp.dur * (0.9 * t / rp.triplets)::float8 + interval '3 s' AS doc_start,
           src.start_url || to_char(rp.c, 'YYYY/MM') || '/report-' || rp.r || '-' || lpad(t::text, 6, '0') || '.pdf' AS url,
           'Report ' || rp.r || '-' || t || ' (' || to_char(rp.c, 'Mon YYYY') || ')' AS label
) AS y
CROSS JOIN LATERAL (
    SELECT encode(sha256(convert_to(y.url, 'UTF8')), 'hex') AS digest,
           y.doc_start + make_interval(secs => 0.5 + 4.5 * pg_temp.h(y.k, 33)) AS doc_end,
           CASE WHEN rp.flaky AND pg_temp.h(y.k, 34) < 0.03 THEN 'failed'
                WHEN pg_temp.h(y.k, 35) < 0.01 THEN 'skipped' ELSE 'completed' END AS doc_fate,
           CASE WHEN rp.flaky AND pg_temp.h(y.k, 36) < 0.02 THEN 'failed'
                WHEN pg_temp.h(y.k, 37) < 0.05 THEN 'review_required'
                WHEN pg_temp.h(y.k, 38) < 0.005 THEN 'skipped' ELSE 'completed' END AS ocr_fate,
           20000 + floor(5000000 * pg_temp.h(y.k, 41))::int AS bytes,
           (%(doc_errors)s::text[])[1 + floor(4 * pg_temp.h(y.k, 40))::int] || ': ' || y.url AS doc_error,
           (%(ocr_errors)s::text[])[1 + floor(3 * pg_temp.h(y.k, 43))::int] AS ocr_error
) AS z
CROSS JOIN LATERAL (
    SELECT z.doc_end + make_interval(secs => 1 + 59 * pg_temp.h(y.k, 44)) AS ocr_start,
           z.doc_end + make_interval(secs => 3 + 59 * pg_temp.h(y.k, 44) + 40 * pg_temp.h(y.k, 45)) AS ocr_end,
           CASE WHEN z.ocr_fate = 'review_required' THEN 5 + floor(40 * pg_temp.h(y.k, 42))::int
                ELSE 300 + floor(80000 * pg_temp.h(y.k, 42))::int END AS characters
) AS ocr
"""

RUNS_INSERT = """
INSERT INTO ingestion_runs (id, source_id, status, active_stage, stats_json, manual, created_at, started_at, finished_at)
SELECT id, source_id,
       CASE WHEN s > %(t0)s THEN 'pending' WHEN ends > %(t0)s THEN 'running' ELSE 'completed' END,
       CASE WHEN s > %(t0)s THEN NULL WHEN ends <= %(t0)s THEN 'summary'
            WHEN s + dur * 0.02 + interval '1 s' > %(t0)s THEN 'discovery'
            WHEN s + dur * 0.9 + interval '8 s' > %(t0)s THEN 'documents' ELSE 'ocr' END,
       %(empty_stats)s, pg_temp.h(r, 39) < 0.1, c, CASE WHEN s <= %(t0)s THEN s END,
       CASE WHEN ends <= %(t0)s THEN ends END
FROM runs_plan ORDER BY r
"""

ITEM_COLUMNS = """run_id, source_id, item_key, item_label, stage, item_type, status, ingest_status, ingest_reason,
    job_id, document_url, filename, file_checksum, file_kind, error_message, last_error_message, needs_review,
    review_reason, payload_json, first_seen_at, last_seen_at, created_at, updated_at"""

# Each run's start page, then per document: its link (discovery), its file (documents), its text
# (ocr), as far as each had got at t0. The items' statement triggers count them into stats_json.
ITEMS_INSERT = f"""
INSERT INTO ingestion_items ({ITEM_COLUMNS})
SELECT {ITEM_COLUMNS} FROM (
    SELECT rp.id AS run_id, rp.source_id, 'source_url_url:' || encode(sha256(convert_to(src.start_url, 'UTF8')), 'hex') AS item_key,
           'Start page' AS item_label, 'discovery' AS stage, 'source_url' AS item_type, 'completed' AS status,
           'completed' AS ingest_status, NULL AS ingest_reason, rp.discover_job AS job_id, src.start_url AS document_url,
           NULL AS filename, NULL AS file_checksum, NULL AS file_kind, NULL AS error_message, NULL AS last_error_message,
           NULL::boolean AS needs_review, NULL AS review_reason,
           jsonb_build_object('links', rp.triplets, 'documents', rp.triplets) AS payload_json,
           rp.s + interval '1 s' AS first_seen_at, rp.s + interval '1 s' AS last_seen_at,
           rp.s + interval '1 s' AS created_at, rp.s + interval '1 s' AS updated_at
    FROM runs_plan rp JOIN ingestion_sources src ON src.id = rp.source_id WHERE rp.s + interval '1 s' <= %(t0)s
    UNION ALL
    SELECT run_id, source_id, 'source_url_url:' || digest, label, 'discovery', 'source_url', 'completed', 'completed',
           NULL, discover_job, url, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, link_ts, link_ts, link_ts, link_ts
    FROM trip WHERE link_ts <= %(t0)s
    UNION ALL
    SELECT run_id, source_id, 'document_url:' || digest, label, 'documents', 'document', st, st,
           CASE WHEN st = 'skipped' THEN 'not a document: text/html' END, download_job, url,
           CASE WHEN st = 'completed' THEN substr(digest, 1, 24) || '.pdf' END,
           CASE WHEN st = 'completed' THEN md5(url) || md5(digest) END, CASE WHEN st = 'completed' THEN 'pdf' END,
           CASE WHEN st = 'failed' THEN doc_error END, CASE WHEN st = 'failed' THEN doc_error END, NULL, NULL,
           CASE WHEN st = 'completed' THEN jsonb_build_object('bytes', bytes, 'content_type', 'application/pdf') END,
           doc_start, least(doc_end, %(t0)s), doc_start, least(doc_end, %(t0)s)
    FROM trip, LATERAL (SELECT CASE WHEN doc_end > %(t0)s THEN 'running' ELSE doc_fate END AS st) AS s
    WHERE doc_start <= %(t0)s
    UNION ALL
    SELECT run_id, source_id, 'ocr_job_url:' || digest, label, 'ocr', 'ocr_job', st, st,
           CASE WHEN st = 'skipped' THEN 'tesseract is not installed' END, ocr_job, url, substr(digest, 1, 24) || '.pdf',
           NULL, NULL, CASE WHEN st = 'failed' THEN ocr_error END, CASE WHEN st = 'failed' THEN ocr_error END,
           CASE st WHEN 'review_required' THEN true WHEN 'completed' THEN false END,
           CASE st WHEN 'review_required' THEN 'too little text: ' || characters || ' characters'
                   WHEN 'skipped' THEN 'tesseract is not installed' END,
           CASE WHEN st IN ('completed', 'review_required') THEN jsonb_build_object(
               'method', 'pdftotext', 'characters', characters,
               'excerpt', upper(label) || E'\\n\\nSummary of the reporting period. Revenue and expenditure by chapter, '
                          || 'commitments carried over, and the auditor''s remarks on page ' || mod(k, 40) || '.') END,
           ocr_start, least(ocr_end, %(t0)s), ocr_start, least(ocr_end, %(t0)s)
    FROM trip, LATERAL (SELECT CASE WHEN ocr_end > %(t0)s THEN 'running' ELSE ocr_fate END AS st) AS s
    WHERE doc_fate = 'completed' AND doc_end <= %(t0)s AND ocr_start <= %(t0)s
) AS items
ORDER BY created_at
"""

# How runs ended as ingestion.services settles them (failed when an item failed, its message
# naming the first), then canceled ones. (Their trigger stamps updated_at with the seeding's time.)
RUNS_FINISH = """
UPDATE ingestion_runs r
SET status = CASE WHEN rp.canceled THEN 'canceled' ELSE 'failed' END,
    active_stage = CASE WHEN rp.canceled THEN 'documents' ELSE 'ocr' END,
    error_message = CASE WHEN NOT rp.canceled THEN f.failed || ' item(s) failed (' || f.first || ')' END
FROM runs_plan rp
LEFT JOIN (
    SELECT run_id, count(*) AS failed,
           (array_agg(stage || ': ' || coalesce(last_error_message, error_message, 'failed') ORDER BY id))[1] AS first
    FROM ingestion_items WHERE status = 'failed' GROUP BY run_id
) AS f ON f.run_id = rp.id
WHERE r.id = rp.id AND r.status = 'completed' AND (rp.canceled OR f.failed IS NOT NULL)
"""

INGEST_TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/srv/app/ingestion/job_handlers.py", line 14, in _run_step\n'
    "    return work(steps.step_of(ctx.args, name, ctx.job_id, stop=ctx.signals.stopped, run=ctx.run_subprocess))\n"
    '  File "/srv/app/ingestion/steps.py", line %s, in %s\n'
    "    raise step.failed(base, str(exc)) from None\n"
    "ingestion.steps.StepFailed: %s"
)
# The jobs that wrote the items (discover per run, download and ocr per document), as rows of
# the jobs' plan (see PLAN_COLUMNS), inserted with the other jobs in created_at order.
INGEST_JOBS = """
CREATE TEMP TABLE ing_jobs AS
SELECT j.*, CASE WHEN j.status = 'queued' THEN 0 ELSE 1 END AS attempt FROM (
    SELECT rp.discover_job AS job_id, %(queue)s AS queue, 'discover' AS task,
           jsonb_build_object('run_id', rp.id, 'source_id', rp.source_id, 'manual', false) AS args,
           'ingestion:' || rp.id || ':discover:source:' || rp.source_id AS idempotency_key,
           'ingestion:' || rp.id || ':source:' || rp.source_id AS lock_key, 100 AS priority, NULL AS producer,
           5 AS max_attempts, 60 AS ttl, rp.c, rp.s - rp.c AS w, rp.dur * 0.02 + interval '1 s' AS d,
           pg_temp.job_status(%(t0)s, rp.s, rp.s + rp.dur * 0.02 + interval '1 s', false) AS status,
           NULL AS error_line, NULL AS error_class, NULL AS traceback,
           jsonb_build_object('links', rp.triplets, 'documents', rp.triplets) AS result,
           (%(workers)s::text[])[1 + mod(rp.r, %(worker_count)s)] AS worker
    FROM runs_plan rp
    UNION ALL
    SELECT download_job, %(queue)s, 'download', jsonb_build_object('run_id', run_id, 'source_id', source_id, 'url', url),
           'ingestion:' || run_id || ':download:source_url_url:' || digest, 'ingestion:' || run_id || ':source_url_url:' || digest,
           100, NULL, 5, 60, link_ts, doc_start - link_ts, doc_end - doc_start,
           pg_temp.job_status(%(t0)s, doc_start, doc_end, doc_fate = 'failed'),
           'FatalError: ' || doc_error, 'jobs.queue.handlers.FatalError', format(%(traceback)s, 165, 'download', doc_error),
           CASE WHEN doc_fate = 'skipped' THEN jsonb_build_object('skipped', 'not a document: text/html')
                ELSE jsonb_build_object('bytes', bytes, 'sha256', md5(url) || md5(digest), 'kind', 'pdf') END,
           (%(workers)s::text[])[1 + mod(k, %(worker_count)s)]
    FROM trip WHERE link_ts <= %(t0)s
    UNION ALL
    SELECT ocr_job, %(queue)s, 'ocr',
           jsonb_build_object('run_id', run_id, 'source_id', source_id, 'url', url,
                              'path', '/var/lib/pipeline/ingestion/' || run_id || '/' || substr(digest, 1, 24) || '.pdf'),
           'ingestion:' || run_id || ':ocr:document_url:' || digest, 'ingestion:' || run_id || ':document_url:' || digest,
           100, NULL, 5, 300, doc_end, ocr_start - doc_end, ocr_end - ocr_start,
           pg_temp.job_status(%(t0)s, ocr_start, ocr_end, ocr_fate = 'failed'),
           'FatalError: ' || ocr_error, 'jobs.queue.handlers.FatalError', format(%(traceback)s, 196, 'ocr', ocr_error),
           CASE WHEN ocr_fate = 'skipped' THEN jsonb_build_object('skipped', 'tesseract is not installed')
                ELSE jsonb_build_object('status', CASE WHEN ocr_fate = 'review_required' THEN 'review_required'
                                                       ELSE 'completed' END,
                                        'method', 'pdftotext', 'characters', characters) END,
           (%(workers)s::text[])[1 + mod(k + 3, %(worker_count)s)]
    FROM trip WHERE doc_fate = 'completed' AND doc_end <= %(t0)s
) AS j
"""


# --- jobs and their events -----------------------------------------------------------------------

GENERIC_TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/srv/app/jobs/registry.py", line 268, in run\n'
    "    return handler(ctx)\n"
    '  File "/srv/app/%s.py", line %s, in %s\n'
    "    %s\n"
    "%s"
)
# The other jobs, numbered n over the 30 days: task by weight, run time around the task's mean;
# the newest more likely queued (a backlog over the last queued_sec), those whose last attempt
# had not ended at t0 running, fail_rate of them failed (at once or after max_attempts), 3 %
# succeeded at the second attempt.
GENERIC_JOBS = """
SELECT pg_temp.uuid7(z.c, z.n) AS job_id, z.queue, z.task,
       CASE z.kind
           WHEN 'report' THEN jsonb_build_object('report', z.func, 'tenant_id', 1 + mod(z.e, 400),
                                                 'date', to_char(z.c - interval '1 day', 'YYYY-MM-DD'))
           WHEN 'export' THEN jsonb_build_object('customer_id', z.e, 'format', (ARRAY['csv', 'parquet', 'xlsx'])[1 + mod(z.n, 3)],
                                                 'requested_by', 'user' || mod(z.e, 9000) || '@example.com')
           WHEN 'page' THEN jsonb_build_object('document_id', z.e, 'page', 1 + mod(z.n, 40), 'dpi', 300)
           WHEN 'file' THEN jsonb_build_object('source_id', 1 + mod(z.e, 200), 'file', z.file, 'run_id', pg_temp.uuid7(z.c, -z.n))
           WHEN 'invoice' THEN jsonb_build_object('invoice_id', z.e, 'customer_id', mod(z.e * 31, 50021),
                                                  'currency', (ARRAY['EUR', 'USD', 'CZK'])[1 + mod(z.e, 3)])
           WHEN 'payment' THEN jsonb_build_object('payment_id', z.e, 'amount_cents', 100 + mod(z.n * 13, 99900), 'currency', 'EUR')
           WHEN 'email' THEN jsonb_build_object('template', (ARRAY['welcome', 'receipt', 'password_reset', 'digest'])[1 + mod(z.n, 4)],
                                                'to', 'user' || z.e || '@example.com')
           WHEN 'push' THEN jsonb_build_object('user_id', z.e, 'title', 'Your order has shipped')
           WHEN 'media' THEN jsonb_build_object('asset_id', z.e, 'sizes', jsonb_build_array(128, 512, 1024))
           WHEN 'document' THEN jsonb_build_object('document_id', z.e, 'index', 'documents_v3')
           WHEN 'webhook' THEN jsonb_build_object('endpoint_id', 1 + mod(z.e, 300), 'delivery_id', z.n,
                                                  'event', (ARRAY['order.created', 'order.paid', 'invoice.sent'])[1 + mod(z.n, 3)])
           WHEN 'batch' THEN jsonb_build_object('model', 'churn-v12', 'batch', z.e, 'rows', 5000)
           WHEN 'crm' THEN jsonb_build_object('account_id', 1 + mod(z.e, 5000), 'since', z.c - interval '1 hour')
           WHEN 'django' THEN jsonb_build_object('args', jsonb_build_array(z.e), 'kwargs', jsonb_build_object('notify', true))
           ELSE '{}' END AS args,
       CASE WHEN z.kind IN ('invoice', 'payment', 'webhook') THEN z.task || ':' || z.e || ':' || z.n END AS idempotency_key,
       z.task || ':' || z.e AS lock_key,
       CASE WHEN pg_temp.h(z.n, 11) < 0.05 THEN 50 WHEN pg_temp.h(z.n, 11) > 0.98 THEN 200 ELSE 100 END AS priority,
       (ARRAY['web', 'api', 'scheduler', 'etl-daemon'])[1 + floor(4 * pg_temp.h(z.n, 12))::int] AS producer,
       z.max_attempts, z.ttl, z.c, z.w, z.d, z.status, z.error_line, z.error_class,
       CASE WHEN z.error_line IS NOT NULL
            THEN format(%(traceback)s, z.module, 20 + mod(z.n, 400), z.func, z.code, z.error_line) END AS traceback,
       CASE WHEN z.status <> 'succeeded' THEN NULL
            WHEN z.kind = 'report' THEN jsonb_build_object('rows', 1000 + mod(z.n, 90000),
                                                           'file', 's3://reports/' || to_char(z.c, 'YYYY/MM/DD') || '/' || z.func || '-' || z.e || '.pdf')
            WHEN z.kind = 'page' THEN jsonb_build_object('characters', 500 + mod(z.n, 4000), 'confidence', 0.8 + mod(z.n, 200) / 1000.0)
            WHEN z.kind = 'file' THEN jsonb_build_object('rows_loaded', 1000 + mod(z.n * 7, 500000))
            WHEN z.kind IN ('email', 'push', 'webhook') THEN jsonb_build_object('status', 'sent')
       END AS result,
       (%(workers)s::text[])[1 + floor(%(worker_count)s * pg_temp.h(z.n, 8))::int] AS worker,
       z.attempt
FROM (
    SELECT y.*, CASE WHEN y.queued THEN 'queued' WHEN y.c + y.w + (y.attempt - 1) * (y.d + %(backoff)s) + y.d > %(t0)s THEN 'running'
                     WHEN y.fails THEN 'failed' ELSE 'succeeded' END AS status,
           CASE WHEN y.fails OR y.attempt > 1
                THEN format(er.fmt, mod(y.n, 997), y.file) END AS error_line,
           er.exception_class AS error_class, er.code
    FROM (
        SELECT x.*, CASE WHEN x.queued THEN 0
                         WHEN x.c + x.w + (x.a - 1) * (x.d + %(backoff)s) + x.d > %(t0)s THEN 1 ELSE x.a END AS attempt
        FROM (
            SELECT b.*, CASE WHEN b.fails THEN b.fail_attempts ELSE b.ok_attempts END AS a,
                   b.c + b.w > %(t0)s OR b.u_queue < 1 - extract(epoch FROM %(t0)s - b.c) / %(queued_sec)s AS queued
            FROM (
                SELECT n, s.queue, s.task, s.kind, s.max_attempts, s.ttl, s.module, s.func,
                       %(start)s + %(span)s * ((n - 1 + pg_temp.h(n, 2)) / %(generic)s::float8) AS c,
                       make_interval(secs => 0.05 + 2 * pg_temp.h(n, 6)) AS w,
                       make_interval(secs => s.mean_sec * (0.3 + 1.4 * pg_temp.h(n, 5))) AS d,
                       pg_temp.h(n, 4) < %(fail_rate)s AS fails, pg_temp.h(n, 3) AS u_queue,
                       CASE WHEN pg_temp.h(n, 9) < 0.5 THEN 1 ELSE s.max_attempts END AS fail_attempts,
                       CASE WHEN pg_temp.h(n, 10) < 0.03 THEN least(2, s.max_attempts) ELSE 1 END AS ok_attempts,
                       mod(n * 7919, 1000003) AS e, 1 + floor(%(error_count)s * pg_temp.h(n, 7))::int AS err,
                       to_char(%(start)s + %(span)s * ((n - 1) / %(generic)s::float8), 'YYYY/MM/DD')
                           || '/part-' || lpad(mod(n, 10000)::text, 4, '0') || '.csv' AS file
                FROM generate_series(%(lo)s::bigint, %(hi)s::bigint) AS n
                JOIN slots s ON s.slot = floor(%(slots)s * pg_temp.h(n, 1))::int
                OFFSET 0  -- a fence: each column computed once, not again in every expression using it
            ) AS b
        ) AS x
        OFFSET 0
    ) AS y
    JOIN errors er ON er.idx = y.err
    OFFSET 0
) AS z
"""

PLAN_COLUMNS = """job_id, queue, task, args, idempotency_key, lock_key, priority, producer, max_attempts, ttl, c, w, d,
    status, error_line, error_class, traceback, result, worker, attempt"""

# One chunk of jobs: the generic ones numbered lo..hi and the ingestion ones created in
# [since, until), in created_at order, with when their last attempt ended.
CHUNK_PLAN = f"""
CREATE TEMP TABLE chunk_plan AS
SELECT u.*, u.c + u.w + (greatest(u.attempt, 1) - 1) * (u.d + %(backoff)s) + u.d AS ends
FROM (
    SELECT {PLAN_COLUMNS} FROM ({GENERIC_JOBS}) AS generic
    UNION ALL
    SELECT {PLAN_COLUMNS} FROM ing_jobs WHERE c >= %(since)s AND c < %(until)s
) AS u
ORDER BY u.c
"""

JOBS_INSERT = """
INSERT INTO dl_jobs (job_id, queue, task, args, idempotency_key, lock_key, priority, available_at, status, attempt,
                     max_attempts, lease_ttl_sec, lease_expires_at, heartbeat_at, error, producer, created_at,
                     started_at, finished_at)
SELECT job_id, queue, task, args, idempotency_key, lock_key, priority, c, status::dl_status, attempt, max_attempts, ttl,
       CASE WHEN status = 'running' THEN %(t0)s + make_interval(secs => ttl - 5) END,
       CASE WHEN status = 'running' THEN %(t0)s - interval '5 s' WHEN attempt > 0 THEN ends - d / 2 END,
       CASE WHEN status = 'failed' THEN error_line || E'\\n\\n' || traceback END,
       producer, c, CASE WHEN attempt > 0 THEN c + w END,
       CASE WHEN status IN ('succeeded', 'failed') THEN ends END
FROM chunk_plan
"""

# Their journals: queued (step 0), then per attempt i picked (c + w, then every d + backoff), a
# heartbeat half way, and how it ended (requeue before its last attempt), as far as each had got
# at t0.
JOB_EVENTS_INSERT = """
INSERT INTO dl_job_events (job_id, queue, ts, kind, payload)
SELECT e.job_id, e.queue, e.ts,
       CASE e.k WHEN 0 THEN 'queued' WHEN 1 THEN 'picked' WHEN 2 THEN 'heartbeat'
                WHEN 3 THEN CASE WHEN e.i < e.attempt THEN 'requeue' WHEN e.status = 'succeeded' THEN 'done' ELSE 'failed' END
       END,
       CASE e.k
           WHEN 0 THEN jsonb_build_object('producer', e.producer, 'idempotency_key', e.idempotency_key, 'available_at', e.c)
           WHEN 1 THEN jsonb_build_object('worker', e.worker, 'attempt', e.i)
           WHEN 2 THEN jsonb_build_object('worker', e.worker)
           WHEN 3 THEN CASE WHEN e.i < e.attempt OR e.status = 'failed'
                            THEN jsonb_build_object('error', e.error_line, 'exception_class', e.error_class, 'traceback', e.traceback)
                            ELSE jsonb_build_object('result', e.result) END
                       || jsonb_build_object('duration_ms', round(extract(epoch FROM e.d) * 1000, 3), 'worker', e.worker,
                                             'attempt', e.i)
                       || CASE WHEN e.i < e.attempt
                               THEN jsonb_build_object('reason', 'retry', 'available_at', e.ts + %(backoff)s)
                               ELSE '{}' END
       END
FROM (
    SELECT p.job_id, p.queue, p.c, p.producer, p.idempotency_key, p.worker, p.attempt, p.status, p.d, p.error_line,
           p.error_class, p.traceback, p.result, st.i, st.k,
           CASE st.k WHEN 0 THEN p.c
                     ELSE p.c + p.w + (st.i - 1) * (p.d + %(backoff)s) + p.d * (CASE st.k WHEN 1 THEN 0 WHEN 2 THEN 0.5 ELSE 1 END)
           END AS ts
    FROM chunk_plan p
    CROSS JOIN LATERAL (SELECT i, k FROM steps WHERE i <= p.attempt) AS st
    OFFSET 0
) AS e
WHERE e.ts <= %(t0)s
"""


# A customer archive that ran for hours over a few attempts: a heartbeat every 30 s, so that its
# journal has `events` rows (attempts of `block` events, the last one longer, then done).
LONG_JOB = """
WITH job AS (
    INSERT INTO dl_jobs (job_id, queue, task, args, lock_key, priority, available_at, status, attempt, max_attempts,
                         lease_ttl_sec, heartbeat_at, producer, created_at, started_at, finished_at)
    VALUES (pg_temp.uuid7(%(created)s, -1), 'exports', 'exports.customer_archive',
            '{"customer_id": 424242, "format": "parquet", "requested_by": "ops@example.com",
              "include": ["orders", "invoices", "events"]}',
            'exports.customer_archive:424242', 100, %(created)s, 'succeeded', %(attempts)s, 10, 600,
            %(created)s + %(step)s * (%(events)s - 2), 'web', %(created)s, %(created)s + %(step)s,
            %(created)s + %(step)s * (%(events)s - 1))
    RETURNING job_id, queue, created_at
)
INSERT INTO dl_job_events (job_id, queue, ts, kind, payload)
SELECT job.job_id, job.queue, job.created_at + %(step)s * k, kk.kind,
       CASE kk.kind
           WHEN 'queued' THEN jsonb_build_object('producer', 'web', 'idempotency_key', NULL, 'available_at', job.created_at)
           WHEN 'picked' THEN jsonb_build_object('worker', %(worker)s::text, 'attempt', att.a)
           WHEN 'heartbeat' THEN jsonb_build_object('worker', %(worker)s::text)
           WHEN 'requeue' THEN jsonb_build_object(
               'error', 'ConnectionResetError: [Errno 104] Connection reset by peer', 'exception_class', 'ConnectionResetError',
               'traceback', 'Traceback (most recent call last):' || E'\\n' || '  File "/srv/app/exports/tasks.py", line 88, in customer_archive'
                            || E'\\n' || '    sock.sendall(payload)' || E'\\n' || 'ConnectionResetError: [Errno 104] Connection reset by peer',
               'duration_ms', round(extract(epoch FROM %(step)s * b.last) * 1000, 3), 'worker', %(worker)s::text, 'attempt', att.a,
               'reason', 'retry', 'available_at', job.created_at + %(step)s * k)
           ELSE jsonb_build_object('result', jsonb_build_object('files', 412, 'bytes', 81234567890),
                                   'duration_ms', round(extract(epoch FROM %(step)s * b.last) * 1000, 3),
                                   'worker', %(worker)s::text, 'attempt', att.a)
       END
FROM job
CROSS JOIN generate_series(0, %(events)s - 1) AS k
CROSS JOIN LATERAL (SELECT least(%(attempts)s, 1 + (k - 1) / %(block)s) AS a) AS att
CROSS JOIN LATERAL (
    SELECT k - 1 - (att.a - 1) * %(block)s AS pos,
           CASE WHEN att.a < %(attempts)s THEN %(block)s - 1 ELSE %(events)s - 2 - (att.a - 1) * %(block)s END AS last
) AS b
CROSS JOIN LATERAL (
    SELECT CASE WHEN k = 0 THEN 'queued' WHEN b.pos = 0 THEN 'picked' WHEN b.pos < b.last THEN 'heartbeat'
                WHEN att.a < %(attempts)s THEN 'requeue' ELSE 'done' END AS kind
) AS kk
ORDER BY k
"""

SCHEDULES = """
INSERT INTO dl_schedules (name, task, args, queue, priority, lock_key, cron, interval_sec, timezone, missed_policy,
                          catch_up_max, paused, next_run_at, last_tick_at, last_job_id, last_skipped, declared_in_code,
                          created_at, created_by, changed_at, changed_by)
SELECT s.task || '.tenant-' || lpad(i::text, 4, '0'), s.task, jsonb_build_object('tenant_id', i), s.queue, 100, NULL,
       CASE WHEN pg_temp.h(i, 50) < 0.7 THEN (%(crons)s::text[])[1 + mod(i, %(cron_count)s)] END,
       CASE WHEN pg_temp.h(i, 50) >= 0.7 THEN (ARRAY[60, 300, 900, 3600])[1 + mod(i, 4)] END,
       (%(zones)s::text[])[1 + mod(i, %(zone_count)s)], (ARRAY['skip', 'once', 'catch_up'])[1 + mod(i, 3)],
       CASE WHEN mod(i, 3) = 2 THEN 10 ELSE 1 END, pg_temp.h(i, 51) < 0.05,
       %(t0)s + make_interval(secs => 1 + 3600 * pg_temp.h(i, 52)),
       %(t0)s - make_interval(secs => 1 + 3600 * pg_temp.h(i, 53)), recent.job_id, 0, pg_temp.h(i, 55) < 0.05,
       %(t0)s - interval '60 days', 'admin', %(t0)s - make_interval(days => mod(i, 50)), 'admin'
FROM generate_series(1, %(schedules)s) AS i
JOIN slots s ON s.slot = floor(%(slots)s * pg_temp.h(i, 54))::int
LEFT JOIN (
    SELECT job_id, row_number() OVER () AS rn
    FROM (SELECT job_id FROM dl_jobs WHERE status = 'succeeded' ORDER BY job_id DESC LIMIT %(schedules)s) AS j
) AS recent ON recent.rn = i
"""


# --- durable processes ---------------------------------------------------------------------------

# One row per process: its events (1..2 x mean - 1, one process with `big_events`), its tasks (init
# emits the first event, each later task up to 8), a waiting timer for 30 % of the running ones,
# and for the 1 % in error the task that failed; task ids numbered on across processes.
PROCESS_PLAN = """
CREATE TEMP TABLE proc_plan AS
SELECT y.*, sum(y.tasks) OVER (ORDER BY y.p) - y.tasks + 1 AS first_task,
       (%(t0)s - y.created) / (y.events + 1) AS step
FROM (
    SELECT x.*, 1 + ceil((x.events - 1) / 8.0)::int AS main_tasks,
           1 + ceil((x.events - 1) / 8.0)::int + (x.status = 'error' OR x.timer)::int AS tasks
    FROM (
        SELECT p, (%(namespaces)s::text[])[1 + floor(%(namespace_count)s * pg_temp.h(p, 40))::int] AS ns,
               %(start)s + %(span)s * ((p - 1 + pg_temp.h(p, 41)) / %(processes)s::float8) AS created,
               CASE WHEN p = %(big)s THEN %(big_events)s
                    ELSE 1 + floor((2 * %(mean_events)s - 1) * pg_temp.h(p, 42))::int END AS events,
               CASE WHEN p <> %(big)s AND pg_temp.h(p, 43) < 0.01 THEN 'error' ELSE 'running' END AS status,
               p <> %(big)s AND pg_temp.h(p, 43) >= 0.01 AND pg_temp.h(p, 44) < 0.3 AS timer
        FROM generate_series(1, %(processes)s) AS p
    ) AS x
) AS y
"""

PROCESSES_INSERT = """
INSERT INTO dl_processes (id, namespace, process_id, status, previous_status, status_changed_at, detail, aux_state,
                          metadata, corrupted_by, last_event_id, created_at)
SELECT p, ns, rtrim(ns, 's') || '-' || to_char(created, 'YYYYMMDD') || '-' || lpad(p::text, 8, '0'), status,
       CASE WHEN status = 'error' THEN 'running' END,
       CASE WHEN status = 'error' THEN created + step * (events + 0.5) ELSE created + step END,
       CASE WHEN status = 'error' THEN 'processor error: timeout task raised KeyError: ''carrier_id''' END,
       jsonb_build_object('version', 3, 'stage', (ARRAY['open', 'paid', 'shipped', 'closed'])[1 + mod(p, 4)],
                          'total_cents', 100 + mod(p * 17, 250000)),
       jsonb_build_object('tenant', 'tenant-' || mod(p, 300), 'source', 'checkout'),
       CASE WHEN status = 'error' THEN first_task + tasks - 1 END, events, created
FROM proc_plan ORDER BY p
"""

# Tasks of processes lo..hi: init, then calls and timeouts (finished), then the waiting timer or
# the failed task.
TASKS_INSERT = """
INSERT INTO dl_proc_tasks (task_id, process_pk, task_type, status, scheduled_time, running_time, finished_time, args,
                           idempotency_key, response, last_retry_interval, attempts_count)
SELECT pp.first_task + k, pp.p, t.type, t.status, t.at, CASE WHEN t.status <> 'waiting' THEN t.at + interval '8 ms' END,
       CASE WHEN t.status <> 'waiting' THEN t.at + interval '40 ms' END,
       CASE t.type WHEN 'init' THEN jsonb_build_object('customer_id', mod(pp.p * 13, 90001), 'currency', 'EUR')
                   WHEN 'call' THEN jsonb_build_object('op', (ARRAY['update', 'pay', 'ship', 'refund', 'note'])[1 + mod(k, 5)],
                                                       'amount_cents', mod(pp.p + k * 7, 10000)) END,
       CASE WHEN t.type = 'call' AND mod(k, 2) = 1 THEN pp.ns || ':' || pp.p || ':' || k END,
       CASE WHEN t.status = 'finished' AND t.type IN ('init', 'call') THEN '"ok"'::jsonb END, 0,
       CASE WHEN t.status = 'error' THEN 1 ELSE 0 END
FROM proc_plan pp
CROSS JOIN generate_series(0, pp.tasks - 1) AS k
CROSS JOIN LATERAL (
    SELECT CASE WHEN k = 0 THEN 'init' WHEN k >= pp.main_tasks THEN 'timeout' WHEN mod(k, 3) = 0 THEN 'timeout' ELSE 'call' END AS type,
           CASE WHEN k < pp.main_tasks THEN 'finished' WHEN pp.status = 'error' THEN 'error' ELSE 'waiting' END AS status,
           CASE WHEN k < pp.main_tasks THEN pp.created + pp.step * (CASE WHEN k = 0 THEN 1 ELSE 2 + (k - 1) * 8 END)
                WHEN pp.status = 'error' THEN pp.created + pp.step * (pp.events + 0.5)
                ELSE %(t0)s + make_interval(secs => 60 + 3540 * pg_temp.h(pp.p, 45)) END AS at
) AS t
WHERE pp.p BETWEEN %(lo)s AND %(hi)s
"""

EVENTS_INSERT = """
INSERT INTO dl_proc_events (process_pk, task_id, event_id, timestamp, metadata, payload)
SELECT pp.p, pp.first_task + CASE WHEN e = 1 THEN 0 ELSE 1 + (e - 2) / 8 END, e, pp.created + pp.step * e,
       '{"format_version": 1}',
       jsonb_build_object('type', CASE WHEN e = 1 THEN rtrim(pp.ns, 's') || '_created'
                                       ELSE (ARRAY['status_changed', 'item_added', 'payment_captured', 'note_added',
                                                   'shipment_updated'])[1 + mod(e * 7 + pp.p, 5)] END,
                          'seq', e, 'amount_cents', mod(pp.p * 31 + e, 10000), 'by', 'user-' || mod(pp.p + e, 700))
FROM proc_plan pp
CROSS JOIN generate_series(1, pp.events) AS e
WHERE pp.p BETWEEN %(lo)s AND %(hi)s
"""

TIMERS_INSERT = """
INSERT INTO dl_proc_schedule (task_id, process_pk, namespace, task_type, status, scheduled_time)
SELECT t.task_id, t.process_pk, pp.ns, t.task_type, t.status, t.scheduled_time
FROM proc_plan pp JOIN dl_proc_tasks t ON t.task_id = pp.first_task + pp.tasks - 1
WHERE pp.timer
"""


# --- pipeline tracking ---------------------------------------------------------------------------


def tracking_insert() -> str:
    """Rows of files numbered 1..files over the 30 days, a shard each: each stage done some time
    after the previous one (about 30 s, 3 min, 10 min, 30 min), started half way, so the newest
    rows wait at each stage; 0.2 % failed at one stage (the later ones left new)."""
    statuses = []
    for k in range(1, 5):
        statuses.append(
            f"""CASE WHEN fs > 0 AND fs < {k} THEN 'new' WHEN at[{k}] > %(t0)s THEN 'new' WHEN fs = {k} THEN 'failed'
                     WHEN at[{k + 1}] <= %(t0)s THEN 'done'
                     WHEN %(t0)s >= at[{k}] + (at[{k + 1}] - at[{k}]) / 2 THEN 'started' ELSE 'new' END"""
        )
    return f"""
    INSERT INTO pipeline_tracking (filename, shard, event_ingest_status, shard_splitter_status, shard_worker_status,
                                   mysql_sender_status, created_at, updated_at)
    SELECT 'events/' || to_char(at[1], 'YYYY/MM/DD/HH24') || '/batch-' || lpad(f::text, 7, '0') || '.avro.gz', shard,
           {", ".join(statuses)}, at[1],
           least(%(t0)s, CASE WHEN fs > 0 AND at[fs] <= %(t0)s THEN at[fs] + interval '1 s'
                              WHEN at[5] <= %(t0)s THEN at[5] WHEN at[4] <= %(t0)s THEN at[4]
                              WHEN at[3] <= %(t0)s THEN at[3] WHEN at[2] <= %(t0)s THEN at[2] ELSE at[1] END)
    FROM (
        SELECT f, shard, CASE WHEN pg_temp.h(i, 66) < 0.002 THEN 1 + floor(4 * pg_temp.h(i, 67))::int ELSE 0 END AS fs,
               ARRAY[c, c1, c2, c3, c4] AS at
        FROM generate_series(0, %(files)s * {SHARDS} - 1) AS i
        CROSS JOIN LATERAL (SELECT i / {SHARDS} + 1 AS f, mod(i, {SHARDS}) AS shard) AS fr
        CROSS JOIN LATERAL (SELECT %(start)s + %(span)s * ((fr.f - 1 + pg_temp.h(fr.f, 60)) / %(files)s::float8) AS c) AS a
        CROSS JOIN LATERAL (SELECT a.c + make_interval(secs => 30 * (0.5 + pg_temp.h(i, 61))) AS c1) AS s1
        CROSS JOIN LATERAL (SELECT s1.c1 + make_interval(secs => 180 * (0.5 + pg_temp.h(i, 62))) AS c2) AS s2
        CROSS JOIN LATERAL (SELECT s2.c2 + make_interval(secs => 600 * (0.5 + pg_temp.h(i, 63))) AS c3) AS s3
        CROSS JOIN LATERAL (SELECT s3.c3 + make_interval(secs => 1800 * (0.5 + pg_temp.h(i, 64))) AS c4) AS s4
        OFFSET 0  -- a fence: the times computed once, not again in every expression using them
    ) AS rows
    """


# --- seeding, phase by phase ---------------------------------------------------------------------


class Phases:
    """Runs the seeding's phases, printing how long each took (two lanes run at once)."""

    def __init__(self):
        self.seconds: dict[str, float] = {}

    def run(self, name: str, work, *args):
        print(f"  {name} ...", flush=True)
        started = time.perf_counter()
        result = work(*args)
        self.seconds[name] = time.perf_counter() - started
        print(f"  {name}: {self.seconds[name]:.1f} s", flush=True)
        return result


def seed(params: dict, scale: float) -> dict:
    """(Re)create the bench databases and seed them at ``scale``, in two lanes at once, then
    VACUUM them; the ids timing needs."""
    sizes = sizes_at(scale)
    check_disk(params, scale)
    print(f"seeding {BENCH_DATABASES['default']} / {BENCH_DATABASES['pipeline']} at scale {scale:g}: {sizes}")
    phases = Phases()
    started = time.perf_counter()
    phases.run("create and migrate", create_bench_databases, params)
    t0 = datetime.now(UTC).replace(microsecond=0)
    with seeding_connection(params, "default") as conn:
        phases.run("workers, queues, periodic tasks, sources", seed_small_tables, conn, t0)
    with ThreadPoolExecutor(max_workers=2) as pool:
        lanes = [pool.submit(lane, params, t0, sizes, phases) for lane in (seed_jobs_lane, seed_other_lane)]
        ids = lanes[0].result() | lanes[1].result()
    with seeding_connection(params, "default") as conn:
        phases.run("audit trail", seed_audit, conn, t0, sizes, ids)
    phases.run("VACUUM ANALYZE", vacuum_all, params)
    ids |= {"scale": scale, "sizes": sizes, "seeded_at": t0.isoformat()}
    ids["seconds"] = round(time.perf_counter() - started, 1)
    with bench_connection(params, "default", autocommit=True) as conn:
        comment = sql.SQL("COMMENT ON DATABASE {} IS {}")
        conn.execute(comment.format(sql.Identifier(BENCH_DATABASES["default"]), sql.Literal(json.dumps(ids))))
    print(f"seeded in {ids['seconds']:.0f} s; {database_sizes(params)}; rows: {row_counts(params)}")
    return ids


def seed_jobs_lane(params: dict, t0: datetime, sizes: dict, phases: Phases) -> dict:
    """dl_jobs, dl_job_events (the most work: alone in their lane, one statement at a time, so
    that rows land in created_at order, as the BRIN indexes expect), then the schedules."""
    with seeding_connection(params, "default") as conn:
        phases.run("plan of the ingestion jobs", plan_ingestion_jobs, conn, t0, sizes)
        ids = {"job": phases.run("jobs and events", seed_jobs, conn, t0, sizes)}
        ids["schedule"] = phases.run("schedules", seed_schedules, conn, t0, sizes)
    return ids


def seed_other_lane(params: dict, t0: datetime, sizes: dict, phases: Phases) -> dict:
    """Ingestion runs and items, processes, pipeline tracking."""
    with seeding_connection(params, "default") as conn:
        ids = {"run": phases.run("ingestion runs and items", seed_ingestion, conn, t0, sizes)}
        ids["process"] = phases.run("processes", seed_processes, conn, t0, sizes)
    with seeding_connection(params, "pipeline") as conn:
        ids["filename_prefix"] = phases.run("pipeline tracking", seed_tracking, conn, t0, sizes)
    return ids


def vacuum_all(params: dict) -> None:
    """VACUUM (ANALYZE) every table, as autovacuum would have by now (hint bits, visibility map:
    index-only scans), and so that it does not start while timing. After both lanes: a seeding
    transaction still running would keep VACUUM from marking the other lane's rows all-visible."""

    def vacuum(alias: str, tables: list[str]) -> None:
        with bench_connection(params, alias, autocommit=True) as conn:
            conn.execute("SET maintenance_work_mem = '512MB'")
            for table in tables:
                conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(sql.Identifier(table)))

    big = ["dl_job_events", "dl_jobs", "dl_proc_events"]
    with bench_connection(params, "default") as conn:
        others = [
            row[0] for row in conn.execute("SELECT relname FROM pg_stat_user_tables WHERE relname <> ALL (%s)", [big])
        ]
    with ThreadPoolExecutor(max_workers=2) as pool:
        work = [
            pool.submit(vacuum, "default", ["dl_job_events", "dl_jobs"]),
            pool.submit(vacuum, "default", ["dl_proc_events", *others]),
            pool.submit(vacuum, "pipeline", ["pipeline_tracking", "pipeline_tracking_history"]),
        ]
        for done in work:
            done.result()
    with bench_connection(params, "default", autocommit=True) as conn:
        conn.execute("CHECKPOINT")  # the seed's dirty pages written now, not by the checkpointer while timing


def check_disk(params: dict, scale: float) -> None:
    """Refuse to start a seed the server's disk cannot hold (when its data directory is local)."""
    needed = FULL_SIZE_BYTES * scale * 1.2
    try:
        with psycopg.connect(**params, autocommit=True) as conn:
            directory = conn.execute("SHOW data_directory").fetchone()[0]
        free = shutil.disk_usage(directory).free
    except (psycopg.Error, OSError):
        print(f"  (cannot see the server's disk: make sure it has {needed / 1e9:.1f} GB free)")
        return
    if free < needed:
        raise SystemExit(f"the server's disk has {free / 1e9:.1f} GB free; this seed needs about {needed / 1e9:.1f} GB")


def row_counts(params: dict) -> str:
    """The big tables' rows (the statistics' count, exact after VACUUM ANALYZE)."""
    counts = []
    for alias, tables in BIG_TABLES.items():
        with bench_connection(params, alias, autocommit=True) as conn:
            for table in tables:
                rows = conn.execute(
                    "SELECT reltuples::bigint FROM pg_class WHERE oid = %s::regclass", [table]
                ).fetchone()[0]
                counts.append(f"{table} {rows:,}")
    return ", ".join(counts)


def database_sizes(params: dict) -> str:
    with psycopg.connect(**params, autocommit=True) as conn:
        sizes = [
            f"{name} {conn.execute('SELECT pg_database_size(%s)', [name]).fetchone()[0] / 1e9:.2f} GB"
            for name in BENCH_DATABASES.values()
        ]
    return ", ".join(sizes)


def plan_ingestion(conn: psycopg.Connection, t0: datetime, sizes: dict) -> dict:
    """Temporary tables runs_plan and trip (the same in each session that makes them: from
    hashes); the parameters of the statements that read them."""
    runs, big_items = sizes["runs"], min(sizes["big_run_items"], sizes["items"])
    params = time_params(t0) | {
        "runs": runs,
        "big": runs // 2 + 1,
        "sources": SOURCES,
        "big_triplets": max(1, round((big_items - 1) / 2.99)),
        # a start page per run, then about 2.99 items per document (no OCR for a skipped one)
        "other_triplets": max(runs, (sizes["items"] - big_items - (runs - 1)) / 2.99),
        "doc_errors": DOCUMENT_ERRORS,
        "ocr_errors": OCR_ERRORS,
        "empty_stats": json.dumps(empty_stats()),
        "workers": [worker["name"] for worker in workers()],
        "worker_count": len(WORKER_HOSTS),
        "traceback": INGEST_TRACEBACK,
        "queue": INGEST_QUEUE,
    }
    conn.execute(RUNS_PLAN, params)
    conn.execute(TRIPLETS, params)
    return params


def seed_ingestion(conn: psycopg.Connection, t0: datetime, sizes: dict) -> str:
    """Runs and the items their jobs wrote (through the items' triggers). The 100,000-item run's id."""
    params = plan_ingestion(conn, t0, sizes)
    conn.execute(RUNS_INSERT, params)
    bulk_insert(conn, "ingestion_items", ITEMS_INSERT, params)  # its triggers count the items into stats_json
    conn.execute(RUNS_FINISH, params)
    analyze(conn, "ingestion_runs", "ingestion_items", "ingestion_run_counts")
    return str(conn.execute("SELECT id FROM runs_plan WHERE r = %s", [params["big"]]).fetchone()[0])


def plan_ingestion_jobs(conn: psycopg.Connection, t0: datetime, sizes: dict) -> None:
    """Temporary table ing_jobs: the jobs that wrote the items, for seed_jobs."""
    conn.execute(INGEST_JOBS, plan_ingestion(conn, t0, sizes))
    conn.execute("CREATE INDEX ON ing_jobs (c)")


def seed_jobs(conn: psycopg.Connection, t0: datetime, sizes: dict) -> str:
    """dl_jobs and dl_job_events in chunks of about a day, then the job with a long journal. Its id."""
    create_catalogs(conn)
    ingest_total, ingest_failed, ingest_queued = conn.execute(
        "SELECT count(*), count(*) FILTER (WHERE status = 'failed'), count(*) FILTER (WHERE status = 'queued') FROM ing_jobs"
    ).fetchone()
    generic = max(1, sizes["jobs"] - ingest_total - 1)
    per_second = generic / SPAN.total_seconds()
    params = time_params(t0) | {
        "generic": generic,
        # 2.5 % of all jobs failed and 1 % queued, the ingestion jobs' share included
        "fail_rate": max(0.0, 0.025 * sizes["jobs"] - ingest_failed) / generic,
        "queued_sec": max(1.0, 2 * (0.01 * sizes["jobs"] - ingest_queued) / per_second),
        "slots": SLOTS,
        "error_count": len(ERRORS),
        "workers": [worker["name"] for worker in workers()],
        "worker_count": len(WORKER_HOSTS),
        "traceback": GENERIC_TRACEBACK,
    }
    chunks = max(1, math.ceil(sizes["jobs"] / JOBS_PER_CHUNK))
    for chunk in range(chunks):
        since = params["start"] + SPAN * chunk / chunks if chunk else t0 - timedelta(days=3650)
        until = params["start"] + SPAN * (chunk + 1) / chunks if chunk < chunks - 1 else t0 + timedelta(days=1)
        lo, hi = generic * chunk // chunks + 1, generic * (chunk + 1) // chunks
        conn.execute("DROP TABLE IF EXISTS chunk_plan")
        conn.execute(CHUNK_PLAN, params | {"lo": lo, "hi": hi, "since": since, "until": until})
        bulk_insert(conn, "dl_jobs", JOBS_INSERT, params)
        bulk_insert(conn, "dl_job_events", JOB_EVENTS_INSERT, params)
        if chunks > 1:
            print(f"    jobs: chunk {chunk + 1} of {chunks} done", flush=True)
    job_id = seed_long_job(conn, t0, sizes["big_job_events"])
    analyze(conn, "dl_jobs", "dl_job_events")
    conn.execute(
        """
        UPDATE dl_workers w SET running_jobs = (
            SELECT count(*) FROM dl_jobs j JOIN dl_job_events e ON e.job_id = j.job_id AND e.kind = 'picked'
            WHERE j.status = 'running' AND e.payload ->> 'worker' = w.hostname || ':' || w.pid || ':' || left(w.worker_id::text, 8)
        )
        """
    )
    return job_id


def create_catalogs(conn: psycopg.Connection) -> None:
    """Temporary tables slots (a job's task by the slot its hash falls in) and errors."""
    conn.execute(
        "CREATE TEMP TABLE slots (slot int PRIMARY KEY, queue text, task text, mean_sec float8, kind text,"
        " max_attempts int, ttl int, module text, func text)"
    )
    total = sum(weight for _queue, _task, weight, *_rest in TASKS)
    bounds, cumulative = [], 0
    for task in TASKS:
        cumulative += task[2]
        bounds.append((cumulative / total, task))
    rows = []
    for slot in range(SLOTS):
        queue, task, _weight, mean, kind, attempts = next(
            entry for bound, entry in bounds if (slot + 0.5) / SLOTS < bound
        )
        package, _dot, func = task.rpartition(".")
        module = package.replace(".", "/") if package.endswith(".tasks") else f"{package.replace('.', '/')}/tasks"
        rows.append((slot, queue, task, mean, kind, attempts, 600 if mean > 60 else 60, module, func))
    with conn.cursor() as cursor:
        cursor.executemany("INSERT INTO slots VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)", rows)
    # A journal's steps: (0, 0) queued, then per attempt (i, 1) picked, (i, 2) heartbeat, (i, 3) its end.
    conn.execute(
        "CREATE TEMP TABLE steps AS SELECT 0 AS i, 0 AS k UNION ALL"
        " (SELECT i, k FROM generate_series(1, %s) AS i, generate_series(1, 3) AS k ORDER BY i, k)",
        [max(attempts for *_rest, attempts in TASKS)],
    )
    conn.execute("CREATE TEMP TABLE errors (idx int PRIMARY KEY, exception_class text, fmt text, code text)")
    with conn.cursor() as cursor:
        cursor.executemany(
            "INSERT INTO errors VALUES (%s, %s, %s, %s)",
            [(number, *error) for number, error in enumerate(ERRORS, start=1)],
        )


def seed_long_job(conn: psycopg.Connection, t0: datetime, events: int) -> str:
    """The job with the longest journal (``events`` events, up to 8 attempts). Its id."""
    attempts = max(1, min(8, events // 10))
    created = t0 - timedelta(days=3)
    params = {
        "created": created,
        "step": timedelta(seconds=30),
        "events": events,
        "attempts": attempts,
        "block": (events - 1) // attempts,
        "worker": workers()[2]["name"],
    }
    conn.execute(LONG_JOB, params)
    return str(conn.execute("SELECT pg_temp.uuid7(%s, -1)", [created]).fetchone()[0])


def seed_schedules(conn: psycopg.Connection, t0: datetime, sizes: dict) -> int:
    """Schedules of the tasks, cron or interval, each with its latest job. The first one's id."""
    params = {
        "t0": t0,
        "schedules": sizes["schedules"],
        "slots": SLOTS,
        "crons": CRONS,
        "cron_count": len(CRONS),
        "zones": TIMEZONES,
        "zone_count": len(TIMEZONES),
    }
    conn.execute(SCHEDULES, params)
    analyze(conn, "dl_schedules")
    return conn.execute("SELECT id FROM dl_schedules ORDER BY name LIMIT 1").fetchone()[0]


def seed_processes(conn: psycopg.Connection, t0: datetime, sizes: dict) -> dict:
    """Processes, their tasks and events in chunks, their timers. The 10,000-event process."""
    processes = sizes["processes"]
    big = processes // 3 + 1
    params = time_params(t0) | {
        "processes": processes,
        "big": big,
        "big_events": min(sizes["big_process_events"], sizes["process_events"]),
        "mean_events": max(1.0, sizes["process_events"] / processes),
        "namespaces": NAMESPACES,
        "namespace_count": len(NAMESPACES),
    }
    conn.execute(PROCESS_PLAN, params)
    bulk_insert(conn, "dl_processes", PROCESSES_INSERT, params)
    chunks = max(1, math.ceil(processes / PROCESSES_PER_CHUNK))
    for chunk in range(chunks):
        bounds = {"lo": processes * chunk // chunks + 1, "hi": processes * (chunk + 1) // chunks}
        bulk_insert(conn, "dl_proc_tasks", TASKS_INSERT, params | bounds)
        bulk_insert(conn, "dl_proc_events", EVENTS_INSERT, params | bounds)
        if chunks > 1:
            print(f"    processes: chunk {chunk + 1} of {chunks} done", flush=True)
    bulk_insert(conn, "dl_proc_schedule", TIMERS_INSERT)
    for table, column in (("dl_processes", "id"), ("dl_proc_tasks", "task_id")):
        conn.execute(
            f"SELECT setval(pg_get_serial_sequence('{table}', '{column}'), (SELECT max({column}) FROM {table}))"
        )
    analyze(conn, "dl_processes", "dl_proc_tasks", "dl_proc_events", "dl_proc_schedule")
    namespace, process_id = conn.execute(
        "SELECT namespace, process_id FROM dl_processes WHERE id = %s", [big]
    ).fetchone()
    return {"pk": big, "namespace": namespace, "process_id": process_id}


AUDIT_INSERT = """
INSERT INTO audit_entries (at, actor, via, address, action, object_type, object_ids, filter, count, detail)
SELECT %(start)s + %(span)s * (i::float8 / %(entries)s),
       CASE WHEN k.via = 'api' THEN 'token:daemon-' || i %% 5 ELSE 'operator-' || i %% 12 END,
       k.via, ('10.0.' || i %% 250 || '.' || i %% 200)::inet, k.action, k.object_type, k.object_ids, k.filter,
       cardinality(k.object_ids) + CASE WHEN k.filter IS NULL THEN 0 ELSE i %% 500 END, '{}'
FROM generate_series(1, %(entries)s) AS i,
     LATERAL (SELECT md5(i::text)::uuid::text AS one,
                     CASE WHEN i %% 100 < 60 THEN 'job' WHEN i %% 100 < 80 THEN 'jobs' WHEN i %% 100 < 85 THEN 'bulk'
                          WHEN i %% 100 < 90 THEN 'queue' WHEN i %% 100 < 95 THEN 'run' WHEN i %% 100 < 98 THEN 'process'
                          WHEN i %% 100 < 99 THEN 'schedule' ELSE 'tracking' END AS kind) AS h,
     LATERAL (SELECT
         CASE WHEN h.kind IN ('job', 'bulk', 'schedule') THEN 'api' WHEN h.kind = 'run' THEN 'pipeline'
              ELSE 'admin' END AS via,
         CASE h.kind WHEN 'job' THEN 'job.retry' WHEN 'jobs' THEN 'job.cancel' WHEN 'bulk' THEN 'job.retry'
              WHEN 'queue' THEN (ARRAY['queue.pause', 'queue.resume'])[1 + i %% 2]
              WHEN 'run' THEN (ARRAY['run.cancel', 'run.retry_failed'])[1 + i %% 2]
              WHEN 'process' THEN 'process.repair' WHEN 'schedule' THEN 'schedule.run_now'
              ELSE 'tracking.retry' END AS action,
         CASE WHEN h.kind IN ('job', 'jobs', 'bulk') THEN 'job' WHEN h.kind = 'tracking' THEN 'tracking row'
              ELSE h.kind END AS object_type,
         CASE h.kind WHEN 'job' THEN ARRAY[h.one] WHEN 'run' THEN ARRAY[h.one]
              WHEN 'jobs' THEN ARRAY[h.one, md5((i + 1)::text)::uuid::text, md5((i + 2)::text)::uuid::text]
              WHEN 'bulk' THEN ARRAY(SELECT md5((i * 100 + n)::text)::uuid::text FROM generate_series(1, 20) AS n)
              WHEN 'queue' THEN ARRAY['reports'] WHEN 'process' THEN ARRAY['orders/p-' || i]
              WHEN 'schedule' THEN ARRAY[(i %% 1000)::text] ELSE ARRAY[(i * 7)::text] END AS object_ids,
         CASE WHEN h.kind = 'bulk' THEN '{"queue": "reports", "status": "failed"}'::jsonb END AS filter) AS k
"""
# Entries naming the objects whose pages are timed (their pages show the latest 20).
AUDIT_OF_TIMED_PAGES = """
INSERT INTO audit_entries (at, actor, via, action, object_type, object_ids, count, detail)
SELECT %(t0)s - n * interval '1 hour', 'operator-1', 'admin', o.action, o.object_type, ARRAY[o.id], 1, '{}'
FROM generate_series(1, 30) AS n,
     (VALUES ('job.retry', 'job', %(job)s), ('run.cancel', 'run', %(run)s),
             ('process.repair', 'process', %(process)s)) AS o (action, object_type, id)
"""


def seed_audit(conn: psycopg.Connection, t0: datetime, sizes: dict, ids: dict) -> None:
    """The audit trail: single and bulk job actions, queue, run, process, schedule and tracking
    actions by users and tokens over the span; 30 each naming the timed job, run and process."""
    bulk_insert(conn, "audit_entries", AUDIT_INSERT, time_params(t0) | {"entries": sizes["audit_entries"]})
    process = f"{ids['process']['namespace']}/{ids['process']['process_id']}"
    conn.execute(AUDIT_OF_TIMED_PAGES, {"t0": t0, "job": str(ids["job"]), "run": str(ids["run"]), "process": process})
    analyze(conn, "audit_entries")


def seed_tracking(conn: psycopg.Connection, t0: datetime, sizes: dict) -> str:
    """pipeline_tracking. A filename prefix of ten days ago (an hour's files) for the search."""
    bulk_insert(conn, "pipeline_tracking", tracking_insert(), time_params(t0) | {"files": sizes["tracking_files"]})
    analyze(conn, "pipeline_tracking")
    return f"events/{t0 - timedelta(days=10):%Y/%m/%d/%H}/"


# --- timing --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Endpoint:
    name: str
    path: str | None  # None: this checkout has no such endpoint
    api: bool = False


def admin_url(name: str, *args, query: dict | None = None) -> str | None:
    from django.urls import NoReverseMatch, reverse

    try:
        url = reverse(f"admin:{name}", args=args)
    except NoReverseMatch:
        return None
    return url + (f"?{urlencode(query)}" if query else "")


def routed(path: str) -> str | None:
    from django.urls import Resolver404, resolve

    try:
        resolve(path.partition("?")[0])
    except Resolver404:
        return None
    return path


def page_endpoints(ids: dict) -> list[Endpoint]:
    jobs = "jobs_job_changelist"
    tracking = "tracking_pipelinetracking_changelist"
    audit = "audit_auditentry_changelist"
    deep_page = min(500, math.ceil(ids["sizes"]["jobs"] / 100))  # the list shows 100 a page
    # The list pages by job id (?before= the last job of the page above); a checkout from before
    # that, by number (?p=).
    deep_query = {"before": _job_id_at((deep_page - 1) * 100 - 1)} if _pages_by_key() else {"p": deep_page}
    pages = [
        ("admin jobs", admin_url(jobs)),
        ("admin jobs: failed", admin_url(jobs, query={"status__exact": "failed"})),
        ("admin jobs: queue reports", admin_url(jobs, query={"queue": "reports"})),
        ("admin jobs: task reports.daily", admin_url(jobs, query={"task": "reports.daily"})),
        ("admin jobs: no such queue", admin_url(jobs, query={"queue": "no-such-queue"})),
        ("admin jobs: args search", admin_url(jobs, query={"q": 'args:{"source_id": 17}'})),
        ("admin jobs: error search", admin_url(jobs, query={"q": "error:timeout"})),
        (f"admin jobs: page {deep_page}", admin_url(jobs, query=deep_query)),
        ("jobs dashboard", admin_url("jobs_job_dashboard")),
        ("job page (longest journal)", admin_url("jobs_job_change", ids["job"])),
        ("admin queues", admin_url("jobs_queue_changelist")),
        ("admin workers", admin_url("jobs_worker_changelist")),
        ("admin periodic tasks", admin_url("jobs_periodictask_changelist")),
        ("admin schedules", admin_url("schedules_schedule_changelist")),
        ("schedule page", admin_url("schedules_schedule_change", ids["schedule"])),
        ("admin tracking", admin_url(tracking)),
        ("admin tracking: worker failed", admin_url(tracking, query={"shard_worker_status__exact": "failed"})),
        ("admin tracking: filename search", admin_url(tracking, query={"q": ids["filename_prefix"]})),
        ("tracking summary", admin_url("tracking_pipelinetracking_summary")),
        ("/pipeline/ runs", routed("/pipeline/")),
        ("/pipeline/ run (biggest run)", routed(f"/pipeline/runs/{ids['run']}/")),
        ("admin processes", admin_url("processes_process_changelist")),
        ("process page (longest history)", admin_url("processes_process_change", ids["process"]["pk"])),
        ("process namespaces", admin_url("processes_process_namespaces")),
        ("admin audit trail", admin_url(audit)),
        ("admin audit trail: run.cancel", admin_url(audit, query={"action": "run.cancel"})),
        ("admin audit trail: via pipeline", admin_url(audit, query={"via": "pipeline"})),
        ("admin audit trail: processes", admin_url(audit, query={"object_type": "process"})),
        ("admin audit trail: a user", admin_url(audit, query={"q": "operator-3"})),
        ("admin audit trail: an object", admin_url(audit, query={"q": str(ids["job"])})),
    ]
    return [Endpoint(name, path) for name, path in pages]


def _pages_by_key() -> bool:
    try:
        from pipeline_project.web.admin import KeysetChangeList  # noqa: F401
    except ImportError:
        return False
    return True


def _job_id_at(position: int) -> str:
    """The id of the job ``position`` places from the newest (read once, before timing)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT job_id FROM dl_jobs ORDER BY job_id DESC OFFSET %s LIMIT 1", [position])
        return str(cursor.fetchone()[0])


def api_endpoints(ids: dict) -> list[Endpoint]:
    from tracking.models import QUEUE_STAGES

    process = ids["process"]
    apis = [
        ("API jobs", "/api/v1/jobs"),
        ("API jobs: reports queued", "/api/v1/jobs?queue=reports&status=queued"),
        ("API jobs: no such queue", "/api/v1/jobs?queue=no-such&status=queued"),
        ("API queues", "/api/v1/queues"),
        *((f"API tracking queue {slug}", f"/api/v1/pipeline/queues/{slug}") for slug in QUEUE_STAGES),
        ("API tracking summary", "/api/v1/pipeline/metrics/summary"),
        ("API schedules", "/api/v1/schedules"),
        ("API ingestion runs", "/api/v1/ingestion/runs"),
        ("API ingestion items", "/api/v1/ingestion/items"),
        ("API ingestion items of a run", f"/api/v1/ingestion/items?run={ids['run']}"),
        ("API process (longest history)", f"/api/v1/processes/{process['namespace']}/{process['process_id']}"),
        ("API process namespace health", f"/api/v1/processes/{process['namespace']}/health"),
        ("/metrics", "/metrics"),
        ("/status", "/status"),
    ]
    return [Endpoint(name, routed(path), api=True) for name, path in apis]


def measure(client: "ServedClient", endpoint: Endpoint, rounds: int) -> dict:
    """Median and p95 (ms) of ``rounds`` GETs after the warm-ups; any answer but 200 stops the run."""
    durations = []
    for request in range(WARMUPS + rounds):
        started = time.perf_counter()
        status, body = client.get(endpoint.path)
        elapsed = (time.perf_counter() - started) * 1000
        if status != 200:
            raise SystemExit(f"{endpoint.name}: GET {endpoint.path} answered {status}: {body[:400]!r}")
        if request >= WARMUPS:
            durations.append(elapsed)
    ordered = sorted(durations)
    return {"median": statistics.median(ordered), "p95": ordered[math.ceil(0.95 * len(ordered)) - 1]}


class ServedClient:
    """GETs to the deployed web server over one keep-alive connection, as a browser or a daemon
    sends them (a session cookie, or a Bearer token), each answer read whole."""

    def __init__(self, port: int, headers: dict[str, str]):
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.headers = {"Host": "localhost", **headers}

    def get(self, path: str) -> tuple[int, bytes]:
        self.connection.request("GET", path, headers=self.headers)
        response = self.connection.getresponse()
        return response.status, response.read()


def clients(port: int) -> tuple[ServedClient, ServedClient]:
    """A superuser's browser (logged in) and a daemon with an API token, for the server on ``port``."""
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.test import Client

    from pipeline_project.core.models import ApiToken
    from pipeline_project.core.services import api_token_create

    users = get_user_model().objects
    user = users.filter(username="big-bench").first() or users.create_superuser("big-bench", "big-bench@example.com")
    browser = Client()
    browser.force_login(user)  # a session in the database, which the server reads from its cookie
    cookie = f"{settings.SESSION_COOKIE_NAME}={browser.cookies[settings.SESSION_COOKIE_NAME].value}"
    ApiToken.objects.filter(name="big-tables-bench").delete()
    _token, key = api_token_create(name="big-tables-bench")
    return ServedClient(port, {"Cookie": cookie}), ServedClient(port, {"Authorization": f"Bearer {key}"})


def time_endpoints(rounds: int) -> dict:
    """Migrate the seeded databases, then time every endpoint on the deployed web server (one
    worker): ``{"seeded": what seed recorded, "endpoints": {name: {api, median, p95} (api only: n/a)}}``."""
    warnings.filterwarnings("ignore", message="No directory at")  # no collectstatic output: none is served
    params = server_params()
    env = bench_env(params)
    try:
        migrate_bench_databases(env)
    except subprocess.CalledProcessError as error:
        raise SystemExit(f"migrating the seeded databases failed:\n{error.stderr[-3000:]}") from None
    use_bench_databases()
    ids = seeded_ids(params)
    print(f"timing databases seeded at scale {ids['scale']:g} on {ids['seeded_at']} ({rounds} rounds)")
    results = {}
    with served(env) as port:
        staff, daemon = clients(port)
        for endpoint in page_endpoints(ids) + api_endpoints(ids):
            figures = measure(daemon if endpoint.api else staff, endpoint, rounds) if endpoint.path else None
            results[endpoint.name] = {"api": endpoint.api, **(figures or {})} if figures else {"api": endpoint.api}
            shown = f"{figures['median']:.1f} / {figures['p95']:.1f} ms" if figures else "n/a"
            print(f"  {endpoint.name:<40} {shown}", flush=True)
    return {"seeded": ids, "endpoints": results}


def served(env: dict):
    """The deployed web command on the bench databases, one worker (every request on the same
    warm process, as a steady server's are), the seeded processes' namespaces declared in it."""
    bench = str(Path(__file__).parent)
    modules = {"PYTHONPATH": bench, "PROCESSES_HANDLER_MODULES": "seeded_namespaces"}
    return gunicorn({**env, **modules}, workers=1)


def seeded_ids(params: dict) -> dict:
    with psycopg.connect(**params, autocommit=True) as conn:
        comment = conn.execute(
            "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
            [BENCH_DATABASES["default"]],
        ).fetchone()
    if not comment or not comment[0]:
        raise SystemExit(f"{BENCH_DATABASES['default']} is not seeded: run `bench/big_tables.py seed` first")
    return json.loads(comment[0])


# --- the report ----------------------------------------------------------------------------------


def target_ms(figures: dict) -> int:
    return API_P95_MS if figures["api"] else PAGE_P95_MS


def cell(figures: dict) -> str:
    return f"{figures['median']:.1f} / {figures['p95']:.1f}" if "p95" in figures else "n/a"


def verdict(small: dict | None, full: dict) -> str:
    """ok, or what misses: the p95 target, the growth from 50k (when there is a 50k figure)."""
    if "p95" not in full:
        return ""
    misses = []
    if full["p95"] > target_ms(full):
        misses.append(f"p95 > {target_ms(full)} ms")
    if small and "p95" in small and full["p95"] > GROWTH_LIMIT * small["p95"]:
        misses.append(f"grows > {GROWTH_LIMIT}x")
    return "MISS: " + ", ".join(misses) if misses else "ok"


def print_single(timed: dict) -> None:
    print(f"\nBig tables at scale {timed['seeded']['scale']:g} (ms)")
    print_data_set(("",), [timed["seeded"]])
    rows = [("endpoint", "median / p95", "target", "verdict")]
    rows += [(name, cell(f), f"p95 <= {target_ms(f)}", verdict(None, f)) for name, f in timed["endpoints"].items()]
    print_rows(rows)


def print_comparison(small: dict, full: dict) -> None:
    print(
        f"\nBig tables: scale {small['seeded']['scale']:g} (50k) against scale {full['seeded']['scale']:g} (full) (ms)"
    )
    print_data_set(("50k", "full"), [small["seeded"], full["seeded"]])
    rows = [("endpoint", "50k median / p95", "full median / p95", "p95 full/50k", "verdict")]
    for name, figures in full["endpoints"].items():
        before = small["endpoints"].get(name, {"api": figures["api"]})
        ratio = f"{figures['p95'] / before['p95']:.2f}x" if "p95" in figures and "p95" in before else "n/a"
        rows.append((name, cell(before), cell(figures), ratio, verdict(before, figures)))
    print_rows(rows)
    print(
        f"targets: pages p95 <= {PAGE_P95_MS} ms; APIs, /metrics, /status p95 <= {API_P95_MS} ms; p95 <= {GROWTH_LIMIT}x 50k's"
    )


def print_data_set(labels: tuple, seeded: list[dict]) -> None:
    """What each data set held (the longest journal, the biggest run, the longest history too)."""
    for label, ids in zip(labels, seeded, strict=True):
        sizes = ids["sizes"]
        print(
            f"  {label + ': ' if label else ''}{sizes['jobs']:,} jobs, {sizes['items']:,} items in {sizes['runs']:,} runs, "
            f"{sizes['tracking_files'] * SHARDS:,} tracking rows, {sizes['processes']:,} processes; longest job journal "
            f"{sizes['big_job_events']:,} events, biggest run {sizes['big_run_items']:,} items, longest process history "
            f"{sizes['big_process_events']:,} events; seeded in {ids['seconds']:.0f} s"
        )


def print_rows(rows: list[tuple]) -> None:
    widths = [max(len(str(row[column])) for row in rows) for column in range(len(rows[0]))]
    for row in rows:
        print("  " + "  ".join(str(value).ljust(width) for value, width in zip(row, widths, strict=True)).rstrip())


# --- the command line ----------------------------------------------------------------------------


def time_in_subprocess(rounds: int) -> dict:
    """``time`` in a process of its own (Django set up on the databases just seeded); its figures."""
    with tempfile.TemporaryDirectory() as directory:
        output = Path(directory) / "times.json"
        command = [PYTHON, str(Path(__file__).resolve()), "time", "--rounds", str(rounds), "--json", str(output)]
        subprocess.run(command, check=True)
        return json.loads(output.read_text())


def main() -> None:
    from job_shapes import SHAPES  # it builds on this module: imported when asked for

    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--scale", type=float, default=1.0, help="size of the second data set (1: full size)")
    parser.add_argument("--rounds", type=int, default=20, help="timed requests per endpoint, after 3 warm-ups")
    parser.add_argument(
        "--shape",
        choices=("year", *SHAPES),
        default="year",
        help="year: this seed, every table; another: jobs only, of that shape (bench/job_shapes.py),\n"
        "at --scale times 10,000,000 jobs, in shapes_control and shapes_pipeline",
    )
    commands = parser.add_subparsers(dest="command")
    seeding = commands.add_parser("seed", help="(re)create the databases and seed them")
    seeding.add_argument("--scale", type=float, default=1.0, help="1: full size; 0.005: 50,000 jobs")
    timing = commands.add_parser("time", help="time every endpoint against the seeded databases")
    timing.add_argument("--rounds", type=int, default=20, help="timed requests per endpoint, after 3 warm-ups")
    timing.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    if args.shape != "year":
        jobs = str(round(args.scale * FULL_SIZES["jobs"]))
        shaped = [PYTHON, str(Path(__file__).with_name("job_shapes.py")), "--shape", args.shape, "--jobs", jobs]
        apart = {**os.environ, "BENCH_DB_PREFIX": "shapes"}  # this seed's databases stay as they are
        subprocess.run([*shaped, "--rounds", str(args.rounds)], check=True, env=apart)
        return
    if args.command == "seed":
        seed(server_params(), args.scale)
    elif args.command == "time":
        results = time_endpoints(args.rounds)
        if args.json:
            args.json.write_text(json.dumps(results))
        else:
            print_single(results)
    else:
        params = server_params()
        timed = []
        for scale in (SMALL_SCALE, args.scale):
            seed(params, scale)
            timed.append(time_in_subprocess(args.rounds))
        print_comparison(*timed)


if __name__ == "__main__":
    main()
