"""The configuration of a runworker (or runreaper) process: what it serves, and its clocks.

What to serve comes from WORKERS_JSON or the flags of each kind of work (``--queue``,
``--namespace``), through one parser with one set of bounds. The runtime's own clocks are
fields here; each kind of work declares its own as a :func:`kind_settings` dataclass and reads
them with ``settings_of`` (tests and commands override any of them by name).
"""

import dataclasses
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from jobs.runtime import registry

MAX_CONCURRENCY = 1000


@dataclass(frozen=True)
class WorkerConfig:
    serves: Mapping[str, Mapping[str, int]]  # kind of work -> {name: concurrency}
    sweep_sec: float
    shutdown_timeout_sec: float
    synchronous_commit: str  # the worker's sessions' (results, leases)
    run_reaper: bool  # run the housekeeping tasks too (runworker without --no-reaper)
    overrides: Mapping[str, Any] = field(default_factory=dict)  # kinds' settings given instead of settings'

    def served(self, kind: str) -> Mapping[str, int]:
        return self.serves.get(kind, {})

    def settings_of(self, kind_settings: type):
        """A kind's :func:`kind_settings` dataclass: each field from ``overrides`` or its setting."""
        return kind_settings(
            **{
                item.name: self.overrides.get(item.name, getattr(settings, item.metadata["setting"]))
                for item in dataclasses.fields(kind_settings)
            }
        )

    @classmethod
    def from_settings(cls, serves: Mapping[str, Mapping[str, int]] | None = None, **overrides) -> "WorkerConfig":
        """What to serve (kind -> {name: concurrency}), with the clocks of the settings unless
        ``overrides`` say otherwise: the runtime's fields, or any kind's settings by name."""
        own = {"sweep_sec", "shutdown_timeout_sec", "synchronous_commit", "run_reaper"}
        unknown = set(overrides) - own - registry.kind_setting_names()
        if unknown:
            raise TypeError(f"no worker setting is called {', '.join(sorted(unknown))}")
        runtime = {
            "sweep_sec": settings.DL_SWEEP_SEC,
            "shutdown_timeout_sec": settings.DL_SHUTDOWN_TIMEOUT_SEC,
            "synchronous_commit": settings.DL_WORKER_SYNCHRONOUS_COMMIT,
            "run_reaper": True,
        }
        runtime.update({name: value for name, value in overrides.items() if name in own})
        kinds = {name: value for name, value in overrides.items() if name not in own}
        served = {kind: dict(names) for kind, names in (serves or {}).items()}
        return cls(serves=served, overrides=kinds, **runtime)


def kind_settings(cls):
    """Declare a kind of work's settings: a frozen dataclass whose fields each name their Django
    setting (``field(metadata={"setting": "DL_HEARTBEAT_SEC"})``); registered so that a worker's
    overrides may name its fields."""
    cls = dataclass(frozen=True)(cls)
    registry.register_kind_settings({item.name for item in dataclasses.fields(cls)})
    return cls


def setting(name: str):
    """A :func:`kind_settings` field read from setting ``name``."""
    return field(metadata={"setting": name})


@dataclass(frozen=True)
class Workers:
    """What WORKERS_JSON or the flags ask a worker to serve: kind -> {name: concurrency}."""

    serves: dict[str, dict[str, int]] = field(default_factory=dict)

    def served(self, kind: str) -> dict[str, int]:
        return self.serves.get(kind, {})


def parse_workers(entries) -> Workers:
    """WORKERS_JSON entries, or the flags made entries.

    One parser for both, so both have the same bounds: ``{KIND: NAME, "concurrency": N}`` with a
    registered kind of work (``queue``, ``namespace``, ...), a name that kind accepts, and a
    concurrency from 1 to 1000 (summed when a name is given twice).
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
        if problem := registry.source_class(kind).name_problem(name):
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
    """``NAME[:CONCURRENCY]`` of a kind's flag (``--queue``, ``--namespace``) as a WORKERS_JSON
    entry; the concurrency, after the last colon, in ASCII digits."""
    name, colon, concurrency = flag.rpartition(":")
    if not colon:
        return {kind: flag}
    if not re.fullmatch(r"[0-9]{1,9}", concurrency):
        raise ValueError(f"expects NAME or NAME:CONCURRENCY, got {flag!r}")
    return {kind: name, "concurrency": int(concurrency)}
