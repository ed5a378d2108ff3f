"""The web tier: requests/s of seven endpoints, the deployed server beside a threaded WSGI twin.

    .venv/bin/python bench/web_tier.py                       # 5 s per endpoint, 3 rounds
    .venv/bin/python bench/web_tier.py --seconds 2 --rounds 1 --only health trigger

16 keep-alive clients (one asyncio loop, raw sockets: the client costs little beside the
servers) send one request after another for ``--seconds`` on each endpoint:

    health      GET  /health
    list        GET  /api/v1/jobs?limit=1                           (authenticated list read)
    stage       GET  /api/v1/pipeline/queues/shard-worker?limit=100     (stage queue read, 20,000 rows)
    trigger     POST /api/v1/jobs/trigger                               (a new job each)
    register    POST /api/v1/pipeline/files/register                    (a new file of 10 shards each)
    upsert      POST /api/v1/ingestion/items                            (one new item each)
    call        POST /api/v1/processes/bench.echo/{id}/call             (synchronous, a runworker answers)

Servers, endpoint by endpoint, taking turns round by round, on the same databases:

    deployed    the web command (`make run`, the image): gunicorn -c pipeline_project/gunicorn_conf.py
                pipeline_project.asgi:application, 2 workers
    wsgi        the same application under gunicorn's gthread worker: 2 workers x 8 threads
    fastapi     (trigger only, informational) the seed's stack: FastAPI, uvicorn, 2 workers, an async
                psycopg pool, the same insert without authentication or idempotency (bench/peers)

Targets, printed beside the figures: deployed ≥ 1.0 × wsgi on every endpoint (median of the
rounds' ratios); /health ≥ 2,000 requests/s on the deployed server.
"""

import argparse
import asyncio
import itertools
import random
import statistics
import time
from contextlib import ExitStack

from common import (
    ROOT,
    SERVER_PIDS,
    cpu_seconds,
    gunicorn,
    keep_alive_load,
    manage,
    print_table,
    server_params,
)
from processes import PROCESSES, processes_served
from tracking_api import load_rows

CLIENTS = 16
HEALTH_TARGET = 2000
RATIO_TARGET = 1.0
STAGE_ROWS = 20_000


class Endpoints:
    """Each endpoint's next request (method, path, body), new keys where the endpoint inserts."""

    def __init__(self, run: dict):
        self.run = run
        self.counter = itertools.count()
        self.rng = random.Random(7)
        self.prefix = f"{time.time_ns():x}"  # rounds never repeat a key

    def health(self):
        return "GET", "/health", None

    def list(self):
        return "GET", "/api/v1/jobs?limit=1", None

    def stage(self):
        return "GET", "/api/v1/pipeline/queues/shard-worker?limit=100", None

    def trigger(self):
        n = next(self.counter)
        return "POST", "/api/v1/jobs/trigger", {"queue": "web", "task": "bench.noop", "lock_key": f"k-{n}"}

    def register(self):
        filename = f"web-{self.prefix}-{next(self.counter)}"
        return "POST", "/api/v1/pipeline/files/register", {"filename": filename, "shards": list(range(10))}

    def upsert(self):
        item = {**self.run, "stage": "discovery", "item_type": "source_url", "status": "completed"}
        return "POST", "/api/v1/ingestion/items", {**item, "source_url_id": f"{self.prefix}-{next(self.counter)}"}

    def call(self):
        return "POST", f"/api/v1/processes/bench.echo/echo-{self.rng.randrange(PROCESSES)}/call", {"args": {"n": 1}}


ENDPOINTS = ["health", "list", "stage", "trigger", "register", "upsert", "call"]


def seed(params: dict) -> dict:
    """Rows the reads find and the writes need: jobs, a stage queue, an ingestion run, processes."""
    from django.db import connections

    from ingestion import services as ingestion
    from ingestion.models import Source
    from jobs.processes import services as processes
    from jobs.queue.services import JobSpec, job_enqueue_many

    job_enqueue_many(specs=[JobSpec(queue="web", task="bench.noop", lock_key=f"seed-{n}") for n in range(1000)])
    load_rows(params, STAGE_ROWS)
    source = Source.objects.create(name="web-bench", start_url="http://127.0.0.1/")
    run = ingestion.run_create(source_id=source.id)
    for n in range(PROCESSES):
        processes.process_init(namespace="bench.echo", process_id=f"echo-{n}")
    connections.close_all()
    return {"run_id": str(run.id), "source_id": source.id}


def fastapi_peer(env: dict):
    return gunicorn(
        {**env, "PEER_DATABASE_URL": env["DATABASE_URL"], "PYTHONPATH": f"{ROOT / 'bench'}:{ROOT}"},
        app="peers.fastapi_trigger:app",
        probe="/openapi.json",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0, help="per endpoint, per server, per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", nargs="+", choices=ENDPOINTS, default=ENDPOINTS)
    parser.add_argument("--no-fastapi", action="store_true", help="leave the FastAPI peer out")
    args = parser.parse_args()

    with processes_served() as env, ExitStack() as stack:  # process inits and calls wait for its runworker
        run = seed(server_params())
        token = manage(env, "apitoken", "create", "bench-web").strip()
        servers = {
            "deployed": stack.enter_context(gunicorn(env)),
            "wsgi": stack.enter_context(
                gunicorn(
                    env,
                    app="pipeline_project.wsgi:application",
                    options=["--worker-class", "gthread", "--threads", "8"],
                )
            ),
        }
        if not args.no_fastapi and "trigger" in args.only:
            servers["fastapi"] = stack.enter_context(fastapi_peer(env))
        rates = measure(servers, args, token, Endpoints(run))
    report(rates, args)


def measure(servers: dict, args, token: str, endpoints: Endpoints) -> dict:
    """{(endpoint, server): [(requests/s, server CPU ms per request) of each round]}: endpoint by
    endpoint, the servers take turns round by round, the first alternating (so no endpoint's
    after-effects, such as calls still waiting, fall on another's figures). CPU per request is
    the servers' own time (workers and master, not PostgreSQL's), steadier than requests/s on a
    busy machine."""
    rates: dict[tuple, list[tuple[float, float]]] = {}
    for endpoint in args.only:
        names = [name for name in servers if name != "fastapi" or endpoint == "trigger"]
        for round_number in range(args.rounds):
            for name in names if round_number % 2 == 0 else reversed(names):
                pid = SERVER_PIDS[servers[name]]
                cpu_before = cpu_seconds(pid)
                rate, statuses, _latencies = asyncio.run(
                    keep_alive_load(
                        servers[name], getattr(endpoints, endpoint), token, clients=CLIENTS, seconds=args.seconds
                    )
                )
                cpu_ms = (cpu_seconds(pid) - cpu_before) * 1000 / max(1, sum(statuses.values()))
                failed = {status: count for status, count in statuses.items() if not 200 <= status < 300}
                print(
                    f"round {round_number + 1}  {endpoint:<9} {name:<9} {rate:>8,.0f} req/s  {cpu_ms:5.2f} ms CPU/req"
                    + (f"  FAILED {failed}" if failed else "")
                )
                rates.setdefault((endpoint, name), []).append((rate, cpu_ms))
    return rates


def report(rates: dict, args) -> None:
    rows = []
    for endpoint in args.only:
        deployed, wsgi = rates[(endpoint, "deployed")], rates[(endpoint, "wsgi")]
        ratio = statistics.median(a[0] / b[0] for a, b in zip(deployed, wsgi, strict=True))
        deployed_rate = statistics.median(rate for rate, _cpu in deployed)
        checks = [f"≥ {RATIO_TARGET}×: {'PASS' if ratio >= RATIO_TARGET else 'FAIL'}"]
        if endpoint == "health":
            checks.append(f"≥ {HEALTH_TARGET:,}/s: {'PASS' if deployed_rate >= HEALTH_TARGET else 'FAIL'}")
        peer = rates.get((endpoint, "fastapi"))
        rows.append(
            (
                endpoint,
                f"deployed {deployed_rate:>7,.0f} ({statistics.median(cpu for _rate, cpu in deployed):.2f} ms CPU)",
                f"wsgi {statistics.median(rate for rate, _cpu in wsgi):>7,.0f} "
                f"({statistics.median(cpu for _rate, cpu in wsgi):.2f} ms CPU)",
                f"ratio {ratio:.2f}×",
                *checks,
                *([f"(fastapi {statistics.median(rate for rate, _cpu in peer):,.0f})"] if peer else []),
            )
        )
    title = f"requests/s, median of {args.rounds} round(s), {CLIENTS} keep-alive clients, {args.seconds:g} s each"
    print_table(title, rows)


if __name__ == "__main__":
    main()
