"""What the chaos bench measures of one scenario, from the jobs' rows and events, the logs and the
web tier's answers, and the table it prints."""

import http.client
import json
import time
from collections import Counter, defaultdict
from pathlib import Path

from common import Background

QUEUE = "chaos"
PHASES = ("clean", "fault", "recovery")
THROUGHPUT_BACK = 0.9  # "back to clean throughput": a second's finished jobs ≥ 90 % of the clean median
PICKUP_CLEAN_FLOOR_SEC = 0.05


class Phases:
    """When each phase began (wall clock, as the database's timestamps) and how long each log was then."""

    def __init__(self):
        self.at: dict[str, float] = {}
        self.log_lines: dict[str, dict[Path, int]] = {}

    def mark(self, name: str, logs: Path) -> None:
        self.at[name] = time.time()
        self.log_lines[name] = {path: _line_count(path) for path in sorted(logs.glob("*.log"))}

    def window(self, name: str) -> tuple[float, float]:
        following = {"clean": "fault", "fault": "recovery", "recovery": "end"}[name]
        return self.at[name], self.at[following]

    def lines_logged(self, first: str, last: str) -> list[str]:
        """The log lines written from phase ``first`` until phase ``last`` began."""
        found = []
        for path, start in self.log_lines[first].items():
            end = self.log_lines[last].get(path, start)
            with path.open() as lines:
                found.extend(line for number, line in enumerate(lines) if start <= number < end)
        return found


def _line_count(path: Path) -> int:
    with path.open("rb") as lines:
        return sum(1 for _ in lines)


class WebProbe(Background):
    """Twice a second: /health, /status and an API read that needs the database, each with a 10 s
    timeout; every answer kept with its time, status, latency and Retry-After."""

    PATHS = {"health": "/health", "status": "/status", "api": "/api/v1/jobs?limit=1"}

    def __init__(self, port: int, token: str):
        super().__init__()
        self.port, self.token = port, token
        self.answers: list[tuple[float, str, int, float, bool]] = []

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            for name, path in self.PATHS.items():
                self.answers.append(self._ask(name, path))

    def _ask(self, name: str, path: str) -> tuple[float, str, int, float, bool]:
        started = time.time()
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            connection.request("GET", path, headers={"Authorization": f"Bearer {self.token}"})
            response = connection.getresponse()
            response.read()
            status, retry_after = response.status, response.getheader("Retry-After") is not None
        except OSError:
            status, retry_after = 0, False  # no answer within the timeout, or refused
        finally:
            connection.close()
        return started, name, status, time.time() - started, retry_after

    def summary(self, start: float, end: float) -> str:
        """Each probe's answers in [start, end): status counts, and the API's slowest answer."""
        seen = defaultdict(Counter)
        slowest, without_retry_after = 0.0, 0
        for at, name, status, seconds, retry_after in self.answers:
            if start <= at < end:
                seen[name][status] += 1
                if name == "api":
                    slowest = max(slowest, seconds)
                    without_retry_after += status == 503 and not retry_after
        parts = [f"{name} " + "/".join(f"{code}×{n}" for code, n in sorted(seen[name].items())) for name in self.PATHS]
        note = f"; {without_retry_after} 503s without Retry-After" if without_retry_after else ""
        return ", ".join(parts) + f"; API slowest {slowest * 1000:.0f} ms{note}"


JOBS = """
SELECT extract(epoch FROM j.created_at), extract(epoch FROM j.finished_at), j.status::text,
       extract(epoch FROM e.first_pick), coalesce(e.picks, 0), coalesce(e.outcomes, 0), coalesce(e.unrun, 0)
FROM dl_jobs j LEFT JOIN (
    SELECT job_id, min(ts) FILTER (WHERE kind = 'picked') AS first_pick,
           count(*) FILTER (WHERE kind = 'picked') AS picks, count(*) FILTER (WHERE kind = 'done') AS outcomes,
           -- picks given back by a claim whose answer was lost: they never ran
           count(*) FILTER (WHERE kind = 'requeue' AND payload ->> 'reason' = 'claim_lost') AS unrun
    FROM dl_job_events WHERE queue = %(queue)s GROUP BY job_id) e USING (job_id)
WHERE j.queue = %(queue)s
"""


def quantile(values: list[float], fraction: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def scenario_report(conn, name: str, phases: Phases, counters: dict, probe: WebProbe, drain_sec: float, rate):
    jobs = conn.execute(JOBS, {"queue": QUEUE}).fetchall()
    offered = counters["producer"]["offered"]
    pickups = [(created, picked - created) for created, _, _, picked, *_ in jobs if picked is not None]
    finished = Counter(int(done) for _, done, status, *_ in jobs if done is not None and status == "succeeded")

    def p99(start: float, end: float) -> float | None:
        return quantile([wait for created, wait in pickups if start <= created < end], 0.99)

    clean_start, fault_start = phases.window("clean")
    recovery_start, end = phases.window("recovery")
    clean_rate = quantile([finished[second] for second in range(int(clean_start) + 1, int(fault_start))], 0.5) or 0
    back_at = next(
        (s for s in range(int(recovery_start), int(end) + 60) if finished[s] >= THROUGHPUT_BACK * clean_rate), None
    )
    clean_p99 = p99(clean_start, fault_start) or 0
    limit = max(PICKUP_CLEAN_FLOOR_SEC, 2 * clean_p99)
    seconds = range(int(recovery_start), int(end))
    late = [s for s in seconds if (p99(s, s + 1) or 0) > limit]
    timeline = [
        (second - int(clean_start), finished[second], _ms(p99(second, second + 1)))
        for second in range(int(clean_start), int(end))
    ]
    logged = phases.lines_logged("fault", "end")
    messages = Counter(_message(line) for line in logged)
    return {
        "scenario": name,
        "offered": offered,
        "lost": offered - sum(1 for job in jobs if job[2] == "succeeded"),
        "repeated": sum(1 for job in jobs if job[4] - job[6] > 1),  # runs: picks that were not given back
        "two outcomes": sum(1 for job in jobs if job[5] > 1),
        "claims lost": sum(job[6] for job in jobs),
        "clean jobs/s": clean_rate,
        "offered jobs/s": rate,
        "back after s": None if back_at is None else max(0, back_at - int(recovery_start)),
        "pickup p99 ms": [_ms(p99(*phases.window(phase))) for phase in PHASES],
        "fault's last 60 s p99 ms": _ms(p99(max(fault_start, recovery_start - 60), recovery_start)),
        "pickup settled after s": (max(late) + 1 - int(recovery_start)) if late else 0,
        "dead rows": counters.get("dead rows at the fault's end"),
        "log lines": len(logged),
        "tracebacks": sum('"exc_info"' in line or "Traceback" in line for line in logged),
        "messages": messages.most_common(6),
        "producer": counters["producer"],
        "fault": {
            key: value for key, value in counters.items() if key not in ("producer", "dead rows at the fault's end")
        },
        "web": {phase: probe.summary(*phases.window(phase)) for phase in PHASES},
        "drain after s": round(drain_sec, 1),
        "timeline": timeline,
    }


def _message(line: str) -> str:
    try:
        record = json.loads(line)
    except ValueError:
        return line.strip()[:100]
    return f"{record.get('level')} {record.get('logger')}: {record.get('message')}"[:120]


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.0f}"


def print_timeline(report: dict) -> None:
    """Second by second from the clean phase on: jobs finished, pickup p99 of the jobs made then."""
    print("    second: finished jobs, pickup p99 ms")
    for start in range(0, len(report["timeline"]), 10):
        print("    " + "  ".join(f"{s:>3}: {n:>4} {p:>5}" for s, n, p in report["timeline"][start : start + 10]))


def print_report(reports: list[dict], *, header: bool) -> None:
    columns = (
        "lost",
        "repeated",
        "two outcomes",
        "claims lost",
        "clean jobs/s",
        "back after s",
        "pickup settled after s",
    )
    if header:
        print(
            f"\n{'scenario':<15} {'offered':>8} "
            + " ".join(f"{c:>12}" for c in columns)
            + "  pickup p99 ms clean/fault/recovery (fault's last 60 s)  dead rows  log lines (tracebacks)"
        )
    for r in reports:
        print(
            f"{r['scenario']:<15} {r['offered']:>8} "
            + " ".join(f"{'-' if r[c] is None else r[c]:>12}" for c in columns)
            + f"  {'/'.join(r['pickup p99 ms'])} ({r["fault's last 60 s p99 ms"]})"
            + f"  {r['dead rows']}  {r['log lines']} ({r['tracebacks']})",
            flush=True,
        )
        if len(reports) == 1:
            producer = r["producer"]
            print(
                f"    producer: {producer['calls']} calls, {producer['failed_calls']} failed and retried "
                f"{producer['errors']}, longest {producer['longest_call_sec']:.1f} s; fault: {r['fault']}; "
                f"backlog done {r['drain after s']} s after the recovery phase"
            )
            for phase, summary in r["web"].items():
                print(f"    web, {phase}: {summary}")
            for message, count in r["messages"]:
                print(f"    logged {count}×  {message}")
