"""Producers' side of job dependencies: check what a job waits for and record it.

What happens when upstream jobs end is the database's (``jobs.queue.dependency_rules``), whatever ends them.
"""

import uuid

from jobs.queue.states import CANCELED_SQL, QUEUED_SQL, EventKind, is_waiting_sql, sql_literal
from pipeline_project.api.errors import InvalidInputError
from pipeline_project.db import sql

MAX_DEPENDS_ON = 100


def depends_on_problem(job_id: uuid.UUID | None, depends_on) -> str | None:
    """Why one job cannot wait for ``depends_on``, or None."""
    if len(depends_on) > MAX_DEPENDS_ON:
        return f"At most {MAX_DEPENDS_ON} jobs."
    if job_id is not None and job_id in depends_on:
        return "A job cannot wait for itself."
    return None


def dependencies_problems(specs) -> dict[str, dict[str, list[str]]]:
    """The batch's jobs that wait, through others of the batch, for themselves or for such a
    job (by index). Jobs that exist already cannot wait for a new one, so only a batch can
    make a cycle: the batch's jobs are taken off as their waits within it are (Kahn's
    algorithm, linear in the edges); those left wait in or behind a cycle.
    """
    waits_for = {spec.job_id: set(spec.depends_on) for spec in specs if spec.job_id is not None}
    pending = {job_id: len(upstream & waits_for.keys()) for job_id, upstream in waits_for.items()}
    needed_by: dict = {}
    for job_id, upstream in waits_for.items():
        for upstream_id in upstream & waits_for.keys():
            needed_by.setdefault(upstream_id, []).append(job_id)
    free = [job_id for job_id, count in pending.items() if count == 0]
    while free:
        for dependent in needed_by.get(free.pop(), ()):
            pending[dependent] -= 1
            if pending[dependent] == 0:
                free.append(dependent)
    return {
        str(index): {"depends_on": ["Waits for itself through other jobs of the batch (a cycle), or for such a job."]}
        for index, spec in enumerate(specs)
        if pending.get(spec.job_id, 0) > 0
    }


def dependencies_insert(*, specs, job_ids: list[uuid.UUID], inserted: dict[uuid.UUID, str]) -> dict[uuid.UUID, str]:
    """Record what the new jobs wait for and settle them at once; ``{job_id: status}`` of those.

    The upstream jobs are locked first (FOR SHARE): one ending meanwhile waits for this
    transaction, so its trigger sees the new rows; one that ended before is read as ended.
    """
    waiting = [
        (index, spec, job_id)
        for index, (spec, job_id) in enumerate(zip(specs, job_ids, strict=True))
        if spec.depends_on and job_id in inserted
    ]
    if not waiting:
        return {}
    upstream_ids = sorted({upstream for _index, spec, _job_id in waiting for upstream in spec.depends_on})
    found = {
        row[0]
        for row in sql.rows(
            "SELECT job_id FROM dl_jobs WHERE job_id = ANY (%(ids)s) ORDER BY job_id FOR SHARE", {"ids": upstream_ids}
        )
    }
    unknown = {
        str(index): {"depends_on": [f"No job {upstream}." for upstream in spec.depends_on if upstream not in found]}
        for index, spec, _job_id in waiting
        if not found.issuperset(spec.depends_on)
    }
    if unknown:
        raise InvalidInputError("Some jobs wait for jobs that do not exist.", details={"jobs": unknown})
    pairs = [
        (job_id, upstream, spec) for _index, spec, job_id in waiting for upstream in dict.fromkeys(spec.depends_on)
    ]
    new_ids = [job_id for _index, _spec, job_id in waiting]
    rows = sql.rows(
        f"""
        WITH links AS (
            INSERT INTO dl_job_dependencies (job_id, upstream_id, run_anyway, requested_available_at, canceled_it)
            SELECT *, false FROM unnest(%(jobs)s::uuid[], %(upstreams)s::uuid[], %(run_anyway)s::bool[],
                                        %(requested)s::timestamptz[])
            RETURNING job_id, upstream_id
        )
        -- A job waiting for a queued job of its lock_key that the key's order puts after it
        -- would wait forever: keys run in order.
        SELECT j.job_id, u.job_id FROM links l
        JOIN dl_jobs j ON j.job_id = l.job_id JOIN dl_jobs u ON u.job_id = l.upstream_id
        WHERE u.status = {QUEUED_SQL} AND u.queue = j.queue AND u.lock_key = j.lock_key
          AND (j.priority, j.created_at, j.job_id) < (u.priority, u.created_at, u.job_id)
        """,
        {
            "jobs": [job_id for job_id, _upstream, _spec in pairs],
            "upstreams": [upstream for _job_id, upstream, _spec in pairs],
            "run_anyway": [spec.run_anyway for _job_id, _upstream, spec in pairs],
            "requested": [spec.available_at for _job_id, _upstream, spec in pairs],
        },
    )
    if rows:
        index = {job_id: index for index, _spec, job_id in waiting}
        raise InvalidInputError(
            "Some jobs wait for a job of their lock_key that runs after them.",
            details={
                "jobs": {
                    str(index[job_id]): {"depends_on": [f"Job {upstream} has this lock_key and runs after this job."]}
                    for job_id, upstream in rows
                }
            },
        )
    sql.execute("SELECT dl_job_dependencies_settle(%(ids)s::uuid[])", {"ids": new_ids})
    return dict(sql.rows("SELECT job_id, status::text FROM dl_jobs WHERE job_id = ANY (%(ids)s)", {"ids": new_ids}))


# For statements deleting ``target`` (CTE: job_id, status; ``{deletable}``: a condition on it):
# their waiting dependents are canceled, naming the deleted job, and the trigger takes it on.
ORPHANS_CANCEL_CTES = f"""
    orphaned AS (
        UPDATE dl_jobs j
        SET status = {CANCELED_SQL}, cancel_requested = true, finished_at = now(),
            error = 'Upstream job ' || o.upstream_id || ' deleted.'
        FROM (
            SELECT DISTINCT ON (d.job_id) d.job_id, d.upstream_id
            FROM dl_job_dependencies d JOIN target t ON t.job_id = d.upstream_id
            WHERE {{deletable}}
            ORDER BY d.job_id, d.upstream_id
        ) AS o
        WHERE j.job_id = o.job_id AND {is_waiting_sql("j")}
          AND j.job_id NOT IN (SELECT job_id FROM target)
        RETURNING j.job_id, j.queue, o.upstream_id
    ),
    orphans_journal AS (
        INSERT INTO dl_job_events (job_id, queue, kind, payload)
        SELECT job_id, queue, {sql_literal(EventKind.CANCELED)}, jsonb_build_object('reason', 'upstream deleted', 'upstream', upstream_id)
        FROM orphaned
    )
"""
