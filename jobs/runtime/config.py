"""The configuration of a runworker (or runreaper) process: what it serves, and its clocks.

What to serve comes from WORKERS_JSON or the ``--queue``/``--namespace`` flags, through one
parser with one set of bounds; the clocks come from settings (tests and commands override them).
"""

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from django.conf import settings

from jobs import services
from jobs.runtime import registry

MAX_CONCURRENCY = 1000


@dataclass(frozen=True)
class WorkerConfig:
    serves: Mapping[str, Mapping[str, int]]  # source kind -> {name: concurrency}
    heartbeat_sec: float
    retry_backoff_sec: float
    sweep_sec: float
    shutdown_timeout_sec: float
    claim_batch: int
    claim_coalesce_sec: float
    record_linger_sec: float
    progress_interval_sec: float
    synchronous_commit: str
    run_reaper: bool  # run the housekeeping tasks too (runworker without --no-reaper)
    reaper_period_sec: float
    retention_period_sec: float
    retention_age_sec: float
    retention_max_identical: int

    @property
    def queues(self) -> Mapping[str, int]:
        return self.serves.get("queue", {})

    @property
    def namespaces(self) -> Mapping[str, int]:
        return self.serves.get("namespace", {})

    @classmethod
    def from_settings(
        cls, queues: Mapping[str, int], *, namespaces: Mapping[str, int] | None = None, **overrides
    ) -> "WorkerConfig":
        """``queues`` and ``namespaces`` to serve (other kinds of source: ``serves``), with the
        clocks of the settings unless ``overrides`` say otherwise."""
        values = {
            "serves": {"queue": dict(queues), "namespace": dict(namespaces or {})},
            "heartbeat_sec": settings.DL_HEARTBEAT_SEC,
            "retry_backoff_sec": settings.DL_RETRY_BACKOFF_SEC,
            "sweep_sec": settings.DL_SWEEP_SEC,
            "shutdown_timeout_sec": settings.DL_SHUTDOWN_TIMEOUT_SEC,
            "claim_batch": settings.DL_CLAIM_BATCH,
            "claim_coalesce_sec": settings.DL_CLAIM_COALESCE_SEC,
            "record_linger_sec": settings.DL_RECORD_LINGER_SEC,
            "progress_interval_sec": settings.DL_PROGRESS_INTERVAL_SEC,
            "synchronous_commit": settings.DL_WORKER_SYNCHRONOUS_COMMIT,
            "run_reaper": True,
            "reaper_period_sec": settings.DL_REAPER_PERIOD_SEC,
            "retention_period_sec": settings.DL_RETENTION_PERIOD_SEC,
            "retention_age_sec": settings.DL_RETENTION_AGE_SEC,
            "retention_max_identical": settings.DL_RETENTION_MAX_IDENTICAL,
        }
        if "serves" in overrides:
            values["serves"] = {**values["serves"], **overrides.pop("serves")}
        return cls(**{**values, **overrides})


@dataclass(frozen=True)
class Workers:
    """What WORKERS_JSON or the flags ask a worker to serve: kind -> {name: concurrency}."""

    serves: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def queues(self) -> dict[str, int]:
        return self.serves.get("queue", {})

    @property
    def namespaces(self) -> dict[str, int]:
        return self.serves.get("namespace", {})


def parse_workers(entries) -> Workers:
    """WORKERS_JSON entries, or ``--queue``/``--namespace`` flags made entries.

    One parser for both, so both have the same bounds: ``{KIND: NAME, "concurrency": N}`` with a
    registered kind of work source (``queue``, ``namespace``, ...), a valid name (as producers
    must use) and a concurrency from 1 to 1000 (summed when a name is given twice).
    """
    if not isinstance(entries, list) or not entries:
        raise ValueError("must be a non-empty JSON list")
    kinds = registry.source_kinds()
    found: dict[str, dict[str, int]] = {}
    for entry in entries:
        named = [kind for kind in kinds if isinstance(entry, dict) and kind in entry]
        if len(named) != 1 or not isinstance(entry[named[0]], str) or set(entry) - {named[0], "concurrency"}:
            one_of = " or ".join(f'"{kind}"' for kind in kinds)
            raise ValueError(f'each entry is {{{one_of}: NAME, "concurrency": N}}: {entry!r}')
        kind, name = named[0], entry[named[0]]
        if problem := services.text_field_problem("queue", name):
            raise ValueError(f"{kind} name {name!r}: {problem}")
        concurrency = entry.get("concurrency", 1)
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or not 1 <= concurrency <= MAX_CONCURRENCY:
            raise ValueError(f"concurrency must be an integer from 1 to {MAX_CONCURRENCY}: {entry!r}")
        served = found.setdefault(kind, {})
        served[name] = served.get(name, 0) + concurrency
        if served[name] > MAX_CONCURRENCY:
            raise ValueError(f"concurrency must be an integer from 1 to {MAX_CONCURRENCY}: {name!r} sums higher")
    return Workers(serves=found)


def parse_workers_json(raw: str) -> Workers:
    """``[{"queue": "load.cbr", "concurrency": 2}, {"namespace": "orders", "concurrency": 10}]``."""
    try:
        entries = json.loads(raw)
    except ValueError:
        raise ValueError("is not valid JSON") from None
    return parse_workers(entries)


def worker_flag_entry(kind: str, flag: str) -> dict:
    """``NAME[:CONCURRENCY]`` of a --queue or --namespace flag as a WORKERS_JSON entry; the
    concurrency, after the last colon, in ASCII digits."""
    name, colon, concurrency = flag.rpartition(":")
    if not colon:
        return {kind: flag}
    if not re.fullmatch(r"[0-9]{1,9}", concurrency):
        raise ValueError(f"expects NAME or NAME:CONCURRENCY, got {flag!r}")
    return {kind: name, "concurrency": int(concurrency)}
