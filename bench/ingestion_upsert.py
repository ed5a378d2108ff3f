"""Ingestion items (seed 004): bulk upsert throughput beside plain psycopg ``executemany``.

    .venv/bin/python bench/ingestion_upsert.py                    # 100,000 items, batches of 1,000
    .venv/bin/python bench/ingestion_upsert.py --items 20000 --rounds 1

Each round, in turns: ``ingestion.services.items_upsert`` (one statement per batch) and the
seed's SQL template (section 7) sent by psycopg's ``executemany`` (pipelined, one transaction
per batch), each into a run of its own: first the items are new (insert), then the same items
again with a new status (update). Both write the same table, with its stats triggers; as each
of executemany's statements fires them, each updates the run's stats row again, and within one
transaction that row's versions pile up: its rate falls as a batch grows and as the run does,
so it writes 20,000 items (--peer-items), which flatters it.
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
OURS = "items_upsert (one statement per batch)"
PEER = "psycopg executemany of the seed's SQL"


def seed_upsert_sql() -> str:
    """The seed's template (section 7) for one item, with psycopg's placeholders."""
    from ingestion.services import COLUMNS, ON_CONFLICT

    return f"""
INSERT INTO ingestion_items ({COLUMNS})
VALUES (
  %(run_id)s, %(source_id)s, %(source_url_id)s, %(document_id)s, %(item_key)s, %(item_label)s, %(stage)s,
  %(item_type)s, %(status)s, %(status)s, %(ingest_reason)s, %(job_id)s, %(document_url)s, %(filename)s,
  %(file_checksum)s, %(file_kind)s, %(error_message)s, %(last_error_message)s, %(needs_review)s,
  %(review_reason)s, coalesce(%(context_json)s, '{{}}'::jsonb), %(payload_json)s, now(), now(), now(), now()
)
{ON_CONFLICT}
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
    sql = seed_upsert_sql()
    started = time.perf_counter()
    for start in range(0, len(rows), batch):
        with conn.transaction(), conn.cursor() as cursor:
            cursor.executemany(sql, rows[start : start + batch])
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument(
        "--peer-items",
        type=int,
        default=20_000,
        help="items executemany writes per round: its per-statement cost grows with each batch's transaction "
        "(every statement updates the run's stats row again), so fewer items flatter it",
    )
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
                for name in (OURS, PEER):
                    run = services.run_create(source_id=source.id)
                    count = args.items if name == OURS else args.peer_items
                    for phase, status in (("insert", "running"), ("update", "completed")):
                        items = items_for(run, count, status)
                        seconds = ours(items, args.batch) if name == OURS else executemany(conn, items, args.batch)
                        rates.setdefault(f"{name}, {phase}", []).append(count / seconds)
        print(
            f"{os.cpu_count()} CPUs; items_upsert {args.items:,} items, executemany {args.peer_items:,}, "
            f"in batches of {args.batch:,}; {args.rounds} rounds in turns"
        )
        rows = []
        for label, values in rates.items():
            median = statistics.median(values)
            row = [label, f"{median:>8,.0f} items/s (median)", " ".join(f"{v:,.0f}" for v in values)]
            if label.startswith(OURS):
                ratio = median / statistics.median(rates[label.replace(OURS, PEER)])
                row.append(
                    f"{ratio:.2f}× executemany; ≥ {TARGET:,}/s: {'PASS' if median >= TARGET and ratio > 1 else 'FAIL'}"
                )
            rows.append(tuple(row))
        print_table("bulk upsert of ingestion items", rows)
    finally:
        from django.db import connections

        connections.close_all()
        drop_bench_databases(params)


if __name__ == "__main__":
    main()
