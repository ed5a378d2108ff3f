"""Durable processes (jobs.processes): synchronous calls per second, and timer lateness.

    .venv/bin/python bench/processes.py                          # full size
    .venv/bin/python bench/processes.py --calls 2000 --timers 300 --timer-window 5

1. calls     100 processes of namespace bench.echo, one runworker process serving it
             (--namespace bench.echo:16); 16 client threads make synchronous calls, each on a
             random process, through the service API (services.process_call: the task is
             scheduled, the worker runs it, the caller wakes on NOTIFY), then the same through
             HTTP (POST /api/v1/processes/bench.echo/{id}/call, the deployed web command: gunicorn,
             2 uvicorn workers) from 16 keep-alive clients on one asyncio loop.
2. timers    1,000 processes imported (process_put) with a timer due at a random moment over
             10 s; each timeout records how late it fired (now − due, the worker's clock).

Targets, printed beside the figures: ≥ 1,000 calls/s through the service API, HTTP ≥ 0.6× the
service API's rate in the same run; timer lateness p99 ≤ 50 ms.
"""

import argparse
import asyncio
import os
import random
import statistics
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import timedelta

from common import (
    PYTHON,
    ROOT,
    create_bench_databases,
    drop_bench_databases,
    gunicorn,
    keep_alive_load,
    manage,
    print_table,
    server_params,
    stop,
    use_bench_databases,
)

CALL_TARGET = 1000
HTTP_RATIO_TARGET = 0.6
LATENESS_TARGET_MS = 50
CLIENTS = 16
PROCESSES = 100


def runworker(env):
    return subprocess.Popen(
        [
            PYTHON,
            "manage.py",
            "runworker",
            "--namespace",
            "bench.echo:16",
            "--namespace",
            "bench.timer:16",
            "--processors",
            "bench.process_processors",
        ],
        cwd=ROOT,
        env={**env, "PYTHONPATH": str(ROOT)},
    )


@contextmanager
def processes_served():
    """Fresh bench databases, this process pointed at them, and a runworker serving the bench's
    namespaces (this process, the web servers and the runworker all load them); yields the env
    for subprocesses. Everything is stopped and dropped on leaving."""
    os.environ["PROCESSES_HANDLER_MODULES"] = "bench.process_processors"
    os.environ["PYTHONPATH"] = str(ROOT)
    params = server_params()
    env = {**create_bench_databases(params), "PROCESSES_HANDLER_MODULES": "bench.process_processors"}
    worker = None
    try:
        use_bench_databases()
        worker = runworker(env)
        yield env
    finally:
        if worker is not None:
            stop(worker)
        from pipeline_project.web.notifications import blocking_hub

        blocking_hub.close()
        drop_bench_databases(params)


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def quantile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


def calls_per_second(call, *, calls: int) -> tuple[float, list[float]]:
    """``calls`` calls of ``call(process_id)`` from CLIENTS threads; calls/s and each latency (ms)."""
    latencies: list[float] = []
    lock = threading.Lock()
    per_client = calls // CLIENTS

    def client(seed):
        rng = random.Random(seed)
        mine = []
        for _ in range(per_client):
            started = time.perf_counter()
            call(f"echo-{rng.randrange(PROCESSES)}")
            mine.append((time.perf_counter() - started) * 1000)
        with lock:
            latencies.extend(mine)

    started = time.perf_counter()
    with ThreadPoolExecutor(CLIENTS) as pool:
        list(pool.map(client, range(CLIENTS)))
    return per_client * CLIENTS / (time.perf_counter() - started), latencies


def bench_calls(env, args) -> list[tuple]:
    """The service API and HTTP taking turns, ``args.rounds`` times each, the first alternating."""
    from django.db import connections

    from jobs.processes import services

    for n in range(PROCESSES):
        services.process_init(namespace="bench.echo", process_id=f"echo-{n}")

    def service_round() -> tuple[float, list[float]]:
        def call(process_id):
            services.process_call(namespace="bench.echo", process_id=process_id, args={"n": 1})

        try:
            return calls_per_second(call, calls=args.calls)
        finally:
            connections.close_all()

    def http_round() -> tuple[float, list[float]]:
        rng = random.Random(7)

        def call():
            return "POST", f"/api/v1/processes/bench.echo/echo-{rng.randrange(PROCESSES)}/call", {"args": {"n": 1}}

        rate, statuses, latencies = asyncio.run(
            keep_alive_load(port, call, token, clients=CLIENTS, requests=args.http_calls)
        )
        if set(statuses) != {200}:
            raise RuntimeError(f"calls failed: {statuses}")
        return rate, latencies

    services.process_call(namespace="bench.echo", process_id="echo-0", args={})  # warm up
    token = manage(env, "apitoken", "create", "bench-processes").strip()
    sides = {"service": service_round, "http": http_round}
    figures: dict[str, list[tuple[float, list[float]]]] = {side: [] for side in sides}
    with gunicorn(env, workers=2) as port:
        for round_number in range(args.rounds):
            for side in sides if round_number % 2 == 0 else reversed(sides):
                figures[side].append(sides[side]())
                print(f"round {round_number + 1}  {side:<8} {figures[side][-1][0]:>7,.0f} calls/s")
    service_rate = statistics.median(rate for rate, _ in figures["service"])
    http_rate = statistics.median(rate for rate, _ in figures["http"])
    ratio = statistics.median(
        http[0] / service[0] for http, service in zip(figures["http"], figures["service"], strict=True)
    )

    def latency(side: str) -> str:
        every = [ms for _, latencies in figures[side] for ms in latencies]
        return f"p50 {statistics.median(every):.1f} ms  p99 {quantile(every, 0.99):.1f} ms"

    return [
        (
            "service API (services.process_call), 16 threads",
            f"{service_rate:>7,.0f} calls/s",
            latency("service"),
            f"target ≥ {CALL_TARGET:,}: {verdict(service_rate >= CALL_TARGET)}",
        ),
        (
            "HTTP POST …/call, 16 keep-alive clients, 2 uvicorn workers",
            f"{http_rate:>7,.0f} calls/s",
            latency("http"),
            f"{ratio:.2f}× the service API, target ≥ {HTTP_RATIO_TARGET}×: {verdict(ratio >= HTTP_RATIO_TARGET)}",
        ),
    ]


def bench_timers(args) -> list[tuple]:
    from django.utils import timezone

    from jobs.processes import services
    from jobs.processes.models import Event

    # Imported with their timers set (process_put), so that no init has to run before a timer
    # exists; the first falls due once all are in.
    start = timezone.now() + timedelta(seconds=1 + 0.005 * args.timers)
    rng = random.Random(7)
    for n in range(args.timers):
        due = (start + timedelta(seconds=rng.uniform(0, args.timer_window))).isoformat()
        services.process_put(
            namespace="bench.timer",
            process_id=f"timer-{n}",
            process={"aux_state": {"due": due}},
            action={"set_timer": due},
        )
    if timezone.now() > start:
        raise RuntimeError("importing the timers took longer than planned: lateness would be measured wrong")
    deadline = time.monotonic() + args.timer_window + 30
    while Event.objects.filter(process__namespace="bench.timer").count() < args.timers:
        if time.monotonic() > deadline:
            raise RuntimeError("not every timer fired")
        time.sleep(0.5)
    late = [event.payload["late_ms"] for event in Event.objects.filter(process__namespace="bench.timer")]
    p99 = quantile(late, 0.99)
    return [
        (
            f"{args.timers:,} timers due over {args.timer_window:g} s, lateness (fired − due)",
            f"p50 {statistics.median(late):.1f} ms",
            f"p99 {p99:.1f} ms",
            f"max {max(late):.1f} ms",
            f"target p99 ≤ {LATENESS_TARGET_MS} ms: {verdict(p99 <= LATENESS_TARGET_MS)}",
        )
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=10_000, help="service API calls")
    parser.add_argument("--http-calls", type=int, default=4_000, help="HTTP calls")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of calls, the service API and HTTP in turns")
    parser.add_argument("--timers", type=int, default=1_000)
    parser.add_argument("--timer-window", type=float, default=10.0, help="seconds over which the timers fall due")
    args = parser.parse_args()

    with processes_served() as env:
        print(f"{os.cpu_count()} CPUs; one runworker serving bench.echo:16 and bench.timer:16")
        print_table(
            f"1. synchronous calls over 100 processes, median of {args.rounds} round(s)", bench_calls(env, args)
        )
        print_table("2. timers", bench_timers(args))


if __name__ == "__main__":
    main()
