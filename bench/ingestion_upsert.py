"""Ingestion items (seed 004): bulk upsert throughput beside plain psycopg ``executemany``.

    .venv/bin/python bench/ingestion_upsert.py                    # 100,000 items, batches of 1,000
    .venv/bin/python bench/ingestion_upsert.py --items 20000 --rounds 1

Each round, in turns: ``ingestion.services.items_upsert`` (one statement per batch) and the
seed's SQL template (section 7) sent by psycopg's ``executemany`` (pipelined, one transaction
per batch), each into a run of its own: first the items are new (insert), then the same items
again with a new status (update). Both write the same table, with its stats triggers.
Targets: faster than ``executemany``; ≥ 20,000 items/s.
"""

import argparse
import os
import statistics
import time

from common import (
    bench_connection,
    create_bench_databases,
    drop_bench_databases,
    print_table,
    server_params,
    use_bench_databases,
)

TARGET = 20_000

# The seed's template (section 7), with psycopg's placeholders.
SEED_UPSERT = """
insert into public.ingestion_items (
  run_id, source_id, source_url_id, document_id, item_key, item_label, stage, item_type, status,
  ingest_status, ingest_reason, job_id, document_url, filename, file_checksum, file_kind,
  error_message, last_error_message, needs_review, review_reason, context_json, payload_json,
  first_seen_at, last_seen_at, created_at, updated_at
)
values (
  %(run_id)s, %(source_id)s, %(source_url_id)s, %(document_id)s, %(item_key)s, %(item_label)s, %(stage)s,
  %(item_type)s, %(status)s, %(status)s, %(ingest_reason)s, %(job_id)s, %(document_url)s, %(filename)s,
  %(file_checksum)s, %(file_kind)s, %(error_message)s, %(last_error_message)s, %(needs_review)s,
  %(review_reason)s, coalesce(%(context_json)s, '{}'::jsonb), %(payload_json)s, now(), now(), now(), now()
)
on conflict (run_id, item_key)
do update set
  source_id = excluded.source_id,
  source_url_id = coalesce(excluded.source_url_id, ingestion_items.source_url_id),
  document_id = coalesce(excluded.document_id, ingestion_items.document_id),
  item_label = coalesce(excluded.item_label, ingestion_items.item_label),
  stage = excluded.stage,
  item_type = excluded.item_type,
  status = excluded.status,
  ingest_status = excluded.status,
  ingest_reason = coalesce(excluded.ingest_reason, ingestion_items.ingest_reason),
  job_id = coalesce(excluded.job_id, ingestion_items.job_id),
  document_url = coalesce(excluded.document_url, ingestion_items.document_url),
  filename = coalesce(excluded.filename, ingestion_items.filename),
  file_checksum = coalesce(excluded.file_checksum, ingestion_items.file_checksum),
  file_kind = coalesce(excluded.file_kind, ingestion_items.file_kind),
  error_message = coalesce(excluded.error_message, ingestion_items.error_message),
  last_error_message = coalesce(excluded.last_error_message, ingestion_items.last_error_message),
  needs_review = coalesce(excluded.needs_review, ingestion_items.needs_review),
  review_reason = coalesce(excluded.review_reason, ingestion_items.review_reason),
  context_json = coalesce(excluded.context_json, ingestion_items.context_json),
  payload_json = coalesce(excluded.payload_json, ingestion_items.payload_json),
  last_seen_at = now(),
  updated_at = now()
"""


def items_for(run, count: int, status: str) -> list[dict]:
    """Documents of ``run``: what a download step records."""
    return [
        {
            "run_id": str(run.id),
            "source_id": run.source_id,
            "document_id": f"doc-{n}",
            "source_url_id": f"url-{n // 10}",
            "item_key": f"document:doc-{n}",
            "stage": "documents",
            "item_type": "document",
            "status": status,
            "document_url": f"https://example.gov/files/{n}.pdf",
            "filename": f"{n}.pdf",
            "file_checksum": f"{n:064x}",
            "file_kind": "pdf",
            "context_json": {"attempt": 1},
        }
        for n in range(count)
    ]


def ours(items: list[dict], batch: int) -> float:
    from ingestion.services import items_upsert

    started = time.perf_counter()
    for start in range(0, len(items), batch):
        items_upsert(items=items[start : start + batch])
    return time.perf_counter() - started


def executemany(conn, items: list[dict], batch: int) -> float:
    from psycopg.types.json import Jsonb

    fields = ("source_url_id", "document_id", "item_label", "ingest_reason", "job_id", "document_url", "filename")
    fields += ("file_checksum", "file_kind", "error_message", "last_error_message", "needs_review", "review_reason")
    rows = [
        {**dict.fromkeys(fields), "payload_json": None, **item, "context_json": Jsonb(item["context_json"])}
        for item in items
    ]
    started = time.perf_counter()
    for start in range(0, len(rows), batch):
        with conn.transaction(), conn.cursor() as cursor:
            cursor.executemany(SEED_UPSERT, rows[start : start + batch])
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    params = server_params()
    create_bench_databases(params)
    try:
        use_bench_databases()
        from ingestion import services
        from ingestion.models import Source

        source = Source.objects.create(name="bench", start_url="https://example.gov/")
        rates: dict[str, list[float]] = {}
        with bench_connection(params, "default", autocommit=True) as conn:
            for _round in range(args.rounds):
                for name in ("items_upsert (one statement per batch)", "psycopg executemany of the seed's SQL"):
                    run = services.run_create(source_id=source.id)
                    for phase, status in (("insert", "running"), ("update", "completed")):
                        items = items_for(run, args.items, status)
                        if name.startswith("items_upsert"):
                            seconds = ours(items, args.batch)
                        else:
                            seconds = executemany(conn, items, args.batch)
                        rates.setdefault(f"{name}, {phase}", []).append(args.items / seconds)
        print(
            f"{os.cpu_count()} CPUs; {args.items:,} items in batches of {args.batch:,}, {args.rounds} rounds in turns"
        )
        rows = []
        for label, values in rates.items():
            row = [label, f"{statistics.median(values):>8,.0f} items/s (median)", " ".join(f"{v:,.0f}" for v in values)]
            if label.startswith("items_upsert"):
                peer = statistics.median(
                    rates[
                        label.replace("items_upsert (one statement per batch)", "psycopg executemany of the seed's SQL")
                    ]
                )
                ratio = statistics.median(values) / peer
                row.append(
                    f"{ratio:.2f}× executemany; ≥ {TARGET:,}/s: {'PASS' if statistics.median(values) >= TARGET and ratio > 1 else 'FAIL'}"
                )
            rows.append(tuple(row))
        print_table("bulk upsert of ingestion items", rows)
    finally:
        from django.db import connections

        connections.close_all()
        drop_bench_databases(params)


if __name__ == "__main__":
    main()
