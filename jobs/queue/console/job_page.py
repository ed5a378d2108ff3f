"""What a job's admin page shows, and the job list's times, from the job's journal.

A job's life is *runs* (its first, then one per operator retry), each made of *attempts*
(numbered on across runs: a retry after attempt 5 starts attempt 6; the page counts them in
their run: that is run 2's attempt 1). Every attempt waited
(ready to be claimed → picked) and ran (picked → its outcome); time the job was not ready
(a retry's backoff, sitting failed before an operator's retry) is neither. The page shows
its header, the operator's buttons its status and the user's permissions allow, the jobs it
waits for and the jobs waiting for it, its data as JSON (long values folded), each attempt's error with its traceback, and the journal by
run and attempt, newest first, with heartbeats folded into one line per stretch.
"""

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import NamedTuple

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from jobs.queue.console.job_actions import action_questions
from jobs.queue.console.job_waits import state_line
from jobs.queue.models import Job
from jobs.queue.selectors import job_dependencies, job_journal, latest_job_events
from jobs.queue.states import RETRYABLE, EventKind, JobStatus, shown_state
from pipeline_project.web.arguments import arguments_shown

FOLD_LINES = 12  # a JSON value longer than this starts folded
JOURNAL_EVENTS = 2000  # the newest events besides heartbeats (a few hundred attempts)
LIST_EVENTS = 200  # per job of the list: enough for its latest run
_TURN_ENDS = {EventKind.REQUEUE, EventKind.DONE, EventKind.FAILED, EventKind.CANCELED, EventKind.LOST}
_NOT_DETAILS = {"worker", "attempt", "traceback", "error"}


@dataclass(frozen=True)
class Shown:
    """A JSON value as the page shows it: pretty-printed, folded when long."""

    text: str
    lines: int

    @property
    def folded(self) -> bool:
        return self.lines > FOLD_LINES

    @property
    def first_line(self) -> str:
        return self.text.split("\n", 1)[0]


def shown(value) -> Shown:
    """Any JSON value, empty ones too: ``{}`` is data, not the absence of it."""
    text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    return Shown(text=text, lines=text.count("\n") + 1)


class JournalRow(NamedTuple):
    """A journal row as the timings need it; ``count`` and ``last_ts``: heartbeats folded together."""

    event_id: int
    ts: datetime
    kind: str
    payload: dict
    count: int = 1
    last_ts: datetime | None = None


@dataclass
class Line:
    event: JournalRow
    since_previous: timedelta | None

    @property
    def details(self) -> str:
        rest = {k: v for k, v in self.event.payload.items() if k not in _NOT_DETAILS and v is not None}
        return json.dumps(rest, sort_keys=True, ensure_ascii=False, default=str) if rest else ""


@dataclass
class Attempt:
    number: int | None  # None: what happened in a run before anything was picked (canceled while queued)
    in_run: int | None = None  # its number in its run (from 1), or ``number`` when the run's start is not shown
    lines: list[Line] = field(default_factory=list)
    waited: timedelta | None = None
    ran: timedelta | None = None


@dataclass
class Run:
    number: int | None  # None: it began before the journal shown
    start: Line | None = None
    attempts: list[Attempt] = field(default_factory=list)
    waiting: timedelta | None = None  # a queued job's wait so far for its next attempt
    running: bool = False

    @property
    def first_attempt(self) -> int | None:
        """The job's attempt number its first attempt has: 1 for the first run, the retry's for a
        retried one (numbers go on across runs); None when its start is not in the journal shown."""
        if self.start is None:
            return None
        if self.start.event.kind == EventKind.QUEUED:
            return 1
        first = self.start.event.payload.get("first_attempt")
        return first if isinstance(first, int) else None

    def in_run(self, number: int | None) -> int | None:
        first = self.first_attempt
        return number - first + 1 if isinstance(number, int) and first is not None else number

    @property
    def waited(self) -> timedelta | None:
        return _total([attempt.waited for attempt in self.attempts] + [self.waiting])

    @property
    def ran(self) -> timedelta | None:
        return _total([attempt.ran for attempt in self.attempts])


@dataclass(frozen=True)
class RunAttempts:
    """A job's attempts as its current run counts them: an operator's retry after attempt 1 of 5
    runs the job's attempts 2 to 6 (``services.jobs_retry`` numbers them on), shown as run 2's 1 to 5."""

    attempt: int  # the run's latest (0: none yet)
    of: int
    run: int | None

    def __str__(self) -> str:
        return self._with_run(f"attempt {self.attempt} of {self.of}")

    @property
    def short(self) -> str:
        return self._with_run(f"{self.attempt}/{self.of}")

    def _with_run(self, text: str) -> str:
        return f"{text} · run {self.run}" if self.run and self.run > 1 else text


def run_attempts(job: Job, run: Run | None) -> RunAttempts:
    """``job``'s attempts in ``run``, its latest (the job's own numbers when the run's start is not shown)."""
    first = run.first_attempt if run else None
    if first is None:
        return RunAttempts(job.attempt, job.max_attempts, run.number if run else None)
    return RunAttempts(max(job.attempt - first + 1, 0), max(job.max_attempts - first + 1, 0), run.number)


def _total(parts) -> timedelta | None:
    present = [part for part in parts if part is not None]
    return sum(present, timedelta()) if present else None


def _plus(total: timedelta | None, start: datetime, end: datetime) -> timedelta:
    return (total or timedelta()) + max(end - start, timedelta())


def _ready_at(event: JournalRow) -> datetime | None:
    """When a queued or requeue event made the job claimable: its time, or the later
    available_at it set (a scheduled job, a retry's backoff); None when it made the job wait
    for other jobs (the requeue event that releases it says when it became ready)."""
    if event.payload.get("waiting"):
        return None
    later = event.payload.get("available_at")
    later = parse_datetime(later) if isinstance(later, str) else None
    return max(event.ts, later) if later else event.ts


def _starts_run(event: JournalRow) -> bool:
    return event.kind == EventKind.QUEUED or (
        event.kind == EventKind.REQUEUE and event.payload.get("reason") == "retry_requested"
    )


def runs_of(events: list[JournalRow], *, status: str, now: datetime) -> list[Run]:
    """The journal (oldest first) as runs of attempts, with each attempt's wait and run time.
    ``status`` and ``now`` close what is still going: a queued job's wait, a running attempt."""
    reader = _Reader()
    for event in events:
        reader.read(event)
    return reader.closed(status=status, now=now)


class _Reader:
    """Reads a journal event by event; a *turn* is a wait (ready since) or a run (picked at)."""

    def __init__(self):
        self.runs: list[Run] = []
        self.run: Run | None = None
        self.attempt: Attempt | None = None
        self.previous: datetime | None = None
        self.ready: datetime | None = None
        self.picked: datetime | None = None

    def read(self, event: JournalRow) -> None:
        line = Line(event, event.ts - self.previous if self.previous else None)
        self.previous = event.last_ts or event.ts
        if _starts_run(event):
            number = event.payload.get("run") if event.kind == "requeue" else 1
            self._begin(Run(number=number if isinstance(number, int) else None, start=line))
            self.ready = _ready_at(event)
            return
        if self.run is None:  # the journal shown begins inside a run
            self._begin(Run(number=None))
        if event.kind == "picked":
            self._pick(event)
        elif self.attempt is None:
            self._attempt(None)
        self.attempt.lines.append(line)
        if event.kind in _TURN_ENDS:
            self._end_turn(event)

    def closed(self, *, status: str, now: datetime) -> list[Run]:
        if self.picked and status == JobStatus.RUNNING:
            self.attempt.ran, self.run.running = _plus(self.attempt.ran, self.picked, now), True
        if self.ready and status == JobStatus.QUEUED:
            self.run.waiting = max(now - self.ready, timedelta())
        return self.runs

    def _begin(self, run: Run) -> None:
        self.runs.append(run)
        self.run, self.attempt, self.ready, self.picked = run, None, None, None

    def _attempt(self, number) -> None:
        number = number if isinstance(number, int) else None
        self.attempt = Attempt(number=number, in_run=self.run.in_run(number))
        self.run.attempts.append(self.attempt)

    def _pick(self, event: JournalRow) -> None:
        number = event.payload.get("attempt")
        if self.attempt is None or self.attempt.number != number:  # a released attempt is picked again as itself
            self._attempt(number)
        if self.ready:
            self.attempt.waited = _plus(self.attempt.waited, self.ready, event.ts)
        self.ready, self.picked = None, event.ts

    def _end_turn(self, event: JournalRow) -> None:
        if self.picked:
            self.attempt.ran = _plus(self.attempt.ran, self.picked, event.ts)
        elif self.ready:  # ended while waiting: canceled while queued, refused by the database
            self.attempt.waited = _plus(self.attempt.waited, self.ready, event.ts)
        self.ready, self.picked = (_ready_at(event) if event.kind == "requeue" else None), None


# --- reads ------------------------------------------------------------------------------------


def _journal(job_id) -> tuple[list[JournalRow], bool]:
    """The job's newest events besides heartbeats, oldest first, each stretch of heartbeats
    after one of them folded into one event; and whether older events were left out."""
    rows, beats = job_journal(job_id=job_id, limit=JOURNAL_EVENTS)
    merged = []
    for index, (event_id, ts, kind, payload) in enumerate(rows, start=1):
        merged.append(JournalRow(event_id, ts, kind, payload if isinstance(payload, dict) else {}))
        if index in beats:
            count, first, last, last_id = beats[index]
            merged.append(JournalRow(last_id, first, "heartbeat", {}, count=count, last_ts=last))
    return merged, len(rows) == JOURNAL_EVENTS


def latest_runs(jobs: list[Job]) -> dict:
    """Each job's latest run, from its newest events (heartbeats apart): the job list's times."""
    if not jobs:
        return {}
    by_job: dict = {}
    for job_id, event_id, ts, kind, payload in latest_job_events(
        job_ids=[job.job_id for job in jobs], per_job=LIST_EVENTS
    ):
        by_job.setdefault(job_id, []).append(JournalRow(event_id, ts, kind, payload))
    now = timezone.now()
    return {
        job.job_id: runs[-1]
        for job in jobs
        if (runs := runs_of(by_job.get(job.job_id, []), status=job.status, now=now))
    }


# --- the page ---------------------------------------------------------------------------------


def job_page(job: Job, *, can_retry: bool, can_cancel: bool, can_remove: bool, request=None) -> dict:
    """The page's context; ``can_retry``, ``can_cancel`` and ``can_remove`` are the user's
    permissions as the admin decides them for the actions; the args' secret values show only if
    the ``request``'s user may view them (``pipeline_project.web.arguments``; masked without a
    request). Read in the caller's snapshot."""
    now = timezone.now()
    events, truncated = _journal(job.job_id)
    runs = runs_of(events, status=job.status, now=now)
    done = [event for event in events if event.kind == "done"]
    current = runs[-1] if runs else Run(number=None)
    dependencies = job_dependencies(job_id=job.job_id)
    attempts = run_attempts(job, current)
    offered = {
        "retry": job.status in RETRYABLE and can_retry,
        "cancel": not job.is_finished and can_cancel,
        "delete": job.status != JobStatus.RUNNING and can_remove,
    }
    state = shown_state(job.status, job.available_at, job.attempt, now)
    return {
        "job": job,
        "live": not job.is_finished,
        "run": current,
        "attempts": attempts,
        "state": state_line(job, state=state, attempts=attempts, upstream=dependencies["upstream"]),
        "can_retry": offered["retry"],
        "can_cancel": offered["cancel"],
        "can_delete": offered["delete"],
        "questions": action_questions(
            job,
            actions=[action for action, shown in offered.items() if shown],
            dependencies=dependencies,
            attempts=attempts,
        ),
        "data": [
            ("args", shown(arguments_shown(job.args, request=request))),
            ("progress", shown(job.progress)),
            ("result", shown(done[-1].payload.get("result")) if done else None),
        ],
        "errors": _errors(runs),
        "runs": runs,  # oldest first: the template shows them (and their attempts) reversed
        "truncated": truncated,
        "dependencies": dependencies,
    }


def _errors(runs: list[Run]) -> list[dict]:
    """Each attempt's error and traceback, newest first, with its run and attempt."""
    return [
        {
            "run": run.number,
            "attempt": attempt.in_run,
            "ts": line.event.ts,
            "kind": line.event.kind,
            "error": line.event.payload["error"],
            "traceback": line.event.payload.get("traceback", ""),
        }
        for run in reversed(runs)
        for attempt in reversed(run.attempts)
        for line in reversed(attempt.lines)
        if line.event.payload.get("error")
    ]
