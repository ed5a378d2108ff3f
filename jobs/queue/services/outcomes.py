"""Recording how runs ended, alone or with the claim of the next job for the slot.

Every write is guarded by the run's lease (``jobs.queue.services.leases``): an outcome whose lease
is no longer held changes nothing.
"""

import json
import uuid
from dataclasses import dataclass, field

from jobs.queue.models import NOTIFY_CHANNEL
from jobs.queue.services.claims import PICKED_EVENTS, ClaimedJob, ClaimFloor, claim_ctes, claim_params, claimed_job
from jobs.queue.services.leases import LEASE_MATCH, Lease, in_batches, locked_leases
from jobs.queue.states import CANCELED_SQL, FAILED_SQL, QUEUED_SQL, SUCCEEDED_SQL, OutcomeKind, sql_literal
from pipeline_project.db import sql


@dataclass(frozen=True)
class Outcome:
    """How a run ended. ``kind``: succeeded, error (retry or fail), fatal (fail now), canceled."""

    lease: Lease
    kind: str
    result: object = None
    error: str | None = None
    details: dict = field(default_factory=dict)
    retry_delay_sec: float = 0.0
    duration_ms: float | None = None
    progress: dict | None = None  # the run's last progress, if not written yet


# Ending runs, as CTEs ``mine`` (the outcomes of locked rows: ``locked_leases``) and ``ended`` (the
# jobs changed), then the announcement of freed lock_keys (``announced``), for statements that end
# runs. ``{taken}``: a condition on ``e`` true when the statement itself took the key's next job.
_OUTCOME_SUCCEEDED, _OUTCOME_CANCELED = sql_literal(OutcomeKind.SUCCEEDED), sql_literal(OutcomeKind.CANCELED)
_OUTCOMES = """
    SELECT * FROM json_to_recordset(%(outcomes)s::json)
        AS mine(job_id uuid, attempt int, started_at timestamptz, kind text, error text, payload jsonb,
                delay float8, progress jsonb)
"""
_END_CTES = f"""
    {{leases}},
    ended AS (
        UPDATE dl_jobs j
        SET status = (CASE
                WHEN mine.kind = {_OUTCOME_SUCCEEDED} THEN {SUCCEEDED_SQL}
                WHEN mine.kind = {_OUTCOME_CANCELED} THEN {CANCELED_SQL}
                WHEN mine.kind = 'error' AND j.attempt < j.max_attempts THEN {QUEUED_SQL}
                ELSE {FAILED_SQL} END)::dl_status,
            error = CASE WHEN mine.kind = {_OUTCOME_SUCCEEDED} THEN NULL ELSE mine.error END,
            available_at = CASE WHEN mine.kind = 'error' AND j.attempt < j.max_attempts
                                THEN now() + make_interval(secs => mine.delay) ELSE j.available_at END,
            finished_at = CASE WHEN mine.kind = 'error' AND j.attempt < j.max_attempts THEN NULL ELSE now() END,
            lease_expires_at = NULL,
            progress = COALESCE(mine.progress, j.progress)
        FROM mine
        WHERE {{guard}}
        RETURNING j.job_id, j.queue, j.lock_key, j.attempt, j.available_at, j.status AS next_status, mine.payload
    ),
    -- Keys these runs freed whose next job is claimable now, by any worker: wake them (one
    -- NOTIFY per queue, as the ready trigger sends). A requeued job is its key's next job itself.
    -- The key's head in claim order (why: jobs.queue.services.claims.FIRST_OF_KEY).
    announced AS (
        SELECT pg_notify('{{channel}}', queue) FROM (
            SELECT DISTINCT e.queue FROM ended e
            WHERE e.next_status <> {QUEUED_SQL} AND NOT ({{taken}})
              AND (SELECT true FROM dl_jobs w
                   WHERE w.queue = e.queue AND w.lock_key = e.lock_key AND w.status = {QUEUED_SQL}
                   ORDER BY w.priority, w.created_at, w.job_id LIMIT 1)
        ) AS freed
    )
"""
_END_EVENTS = f"""
    SELECT job_id, queue,
           CASE next_status WHEN {SUCCEEDED_SQL} THEN 'done' WHEN {QUEUED_SQL} THEN 'requeue' ELSE next_status::text END,
           payload || jsonb_build_object('worker', %(worker)s::text, 'attempt', attempt)
           || CASE WHEN next_status = {QUEUED_SQL} THEN jsonb_build_object('reason', 'retry', 'available_at', available_at)
                   ELSE '{{}}'::jsonb END
    FROM ended
"""
# Read by the final SELECT: a SELECT CTE runs only if something reads it; set_config with
# is_local lasts until the statement's (autocommit) transaction commits.
_END_CONDITIONS = """
    (SELECT count(*) FROM announced) >= 0
    AND (%(synchronous_commit)s::text IS NULL OR set_config('synchronous_commit', %(synchronous_commit)s, true) <> '')
"""


def _end_ctes(*, taken: str = "false") -> str:
    return _END_CTES.format(leases=locked_leases(_OUTCOMES), guard=LEASE_MATCH, channel=NOTIFY_CHANNEL, taken=taken)


def _end_params(outcomes: list[Outcome], *, worker_id: str, synchronous_commit: str | None) -> dict:
    # One JSON document rather than an array per field: psycopg dumps arrays item by item in Python.
    return {
        "job_ids": [outcome.lease.job_id for outcome in outcomes],  # the rows locked (locked_leases)
        "outcomes": json.dumps(
            [
                {
                    "job_id": str(outcome.lease.job_id),
                    "attempt": outcome.lease.attempt,
                    "started_at": outcome.lease.started_at.isoformat(),
                    "kind": outcome.kind,
                    "error": outcome.error,
                    "payload": _outcome_payload(outcome),
                    "delay": outcome.retry_delay_sec,
                    "progress": outcome.progress,
                }
                for outcome in outcomes
            ]
        ),
        "synchronous_commit": synchronous_commit,
        "worker": worker_id,
    }


def jobs_complete(
    *, outcomes: list[Outcome], worker_id: str, synchronous_commit: str | None = None
) -> dict[uuid.UUID, str]:
    """Record how runs ended, in one statement per LEASE_BATCH; return ``{job_id: new status}``.

    succeeded → succeeded; canceled → canceled; fatal → failed; error → queued again
    after ``retry_delay_sec`` while attempts remain, else failed. Outcomes whose lease
    is no longer held are ignored (absent from the answer). ``synchronous_commit`` sets that
    setting for this statement only.
    """
    ended = {}
    for batch in in_batches(outcomes):
        rows = sql.rows(
            f"""
            WITH {_end_ctes()},
            journal AS (INSERT INTO dl_job_events (job_id, queue, kind, payload) {_END_EVENTS})
            SELECT job_id, next_status::text FROM ended WHERE {_END_CONDITIONS}
            """,
            _end_params(batch, worker_id=worker_id, synchronous_commit=synchronous_commit),
        )
        ended.update(rows)
    return ended


# The claim after ending runs: ended first (their keys free up), and not a key whose ended job
# was requeued (the snapshot shows that job running, but it is its key's first job again).
_AFTER_ENDED = f"""
    AND (SELECT count(*) FROM ended) > 0
    AND c.lock_key <> ALL (ARRAY(SELECT lock_key FROM ended WHERE next_status = {QUEUED_SQL}))
"""


def job_complete_and_claim(
    *,
    outcome: Outcome,
    queue: str,
    worker_id: str,
    synchronous_commit: str | None = None,
    floor: ClaimFloor | None = None,
) -> tuple[str | None, ClaimedJob | None]:
    """Record one run's outcome and claim the next job for its slot, in one statement.

    For a run whose lock_key has jobs waiting: its key counts as free for this claim, so the
    slot goes to the queue's first claimable job — the key's next job, unless another is due
    before it — with no claim round trip and no race between workers for it. Returns the
    job's new status (None: the lease was gone, nothing written or claimed) and the claimed
    job, if any. ``floor``: where the claim starts reading (``jobs_claim_from``).
    """
    rows = sql.rows(
        f"""
        WITH RECURSIVE {_end_ctes(taken="EXISTS (SELECT FROM claimed c WHERE c.lock_key = e.lock_key)")},
        {claim_ctes(after=_AFTER_ENDED)},
        journal AS (
            INSERT INTO dl_job_events (job_id, queue, kind, payload) {_END_EVENTS} UNION ALL {PICKED_EVENTS}
        )
        SELECT ended.next_status::text, claimed.* FROM ended LEFT JOIN claimed ON true WHERE {_END_CONDITIONS}
        """,
        {
            **_end_params([outcome], worker_id=worker_id, synchronous_commit=synchronous_commit),
            **claim_params(queue=queue, limit=1, ending=[outcome.lease.job_id], floor=floor),
        },
    )
    if not rows:
        return None, None
    return rows[0][0], (claimed_job(rows[0][1:]) if rows[0][1] is not None else None)


def _outcome_payload(outcome: Outcome) -> dict:
    payload = dict(outcome.details)
    if outcome.kind == OutcomeKind.SUCCEEDED:
        payload["result"] = outcome.result
    if outcome.error:
        payload["error"] = outcome.error
    if outcome.duration_ms is not None:
        payload["duration_ms"] = round(outcome.duration_ms, 3)
    return payload
