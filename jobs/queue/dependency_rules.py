"""Job dependencies in the database: one SQL function settles waiting jobs, one trigger calls it.

A job that waits for others is ``queued`` with ``available_at`` = ``states.WAITING_AVAILABLE_AT``,
so the claim (``available_at <= now()``) never sees it and jobs without dependencies pay
nothing. ``dl_job_dependencies_settle(jobs)`` decides each given waiting job's fate from its
upstream jobs' statuses: all succeeded (or, with run_anyway, all finished) → released at the
available_at its producer asked for (the notify trigger wakes the workers); one failed,
canceled or lost and no run_anyway → canceled, naming it. The ``dl_jobs_notify_upd`` trigger
calls ``dl_job_dependencies_react`` for every statement that ends jobs others wait for — a
worker's outcome, an operator's cancel, the reaper — so every path obeys one rule; when a job
is retried, it brings back the jobs its end had canceled; and the effects run down chains.
"""

from jobs.queue.states import (
    CANCELED_SQL,
    FINISHED_SQL,
    QUEUED_SQL,
    RUNNING_SQL,
    SUCCEEDED_SQL,
    UNSUCCESSFUL_SQL,
    WAITING_SQL,
    EventKind,
    is_waiting_sql,
    sql_literal,
)

# Returns the jobs it canceled. Locks the jobs first (a statement of its own), so two upstream
# jobs ending at once settle their dependent one after the other, the second reading the
# first's committed status.
SETTLE_FUNCTION = f"""
CREATE OR REPLACE FUNCTION dl_job_dependencies_settle(candidates uuid[]) RETURNS uuid[]
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    done uuid[];
BEGIN
    PERFORM FROM dl_jobs WHERE job_id = ANY (candidates) AND status = {QUEUED_SQL} ORDER BY job_id FOR NO KEY UPDATE;
    WITH state AS MATERIALIZED (
        SELECT d.job_id, bool_and(u.status = {SUCCEEDED_SQL}) AS all_succeeded,
               bool_and(u.status IN {FINISHED_SQL}) AS all_finished, bool_or(d.run_anyway) AS run_anyway,
               max(d.requested_available_at) AS requested,
               (array_agg(u.job_id ORDER BY u.job_id) FILTER (WHERE u.status IN {UNSUCCESSFUL_SQL}))[1] AS culprit,
               (array_agg(u.status::text ORDER BY u.job_id) FILTER (WHERE u.status IN {UNSUCCESSFUL_SQL}))[1] AS culprit_status
        FROM dl_job_dependencies d JOIN dl_jobs u ON u.job_id = d.upstream_id
        WHERE d.job_id = ANY (candidates)
        GROUP BY d.job_id
    ),
    ready AS (
        UPDATE dl_jobs j SET available_at = GREATEST(s.requested, now())
        FROM state s
        WHERE j.job_id = s.job_id AND {is_waiting_sql("j")}
          AND (s.all_succeeded OR (s.run_anyway AND s.all_finished))
        RETURNING j.job_id, j.queue, j.available_at, s.all_succeeded
    ),
    canceled AS (
        UPDATE dl_jobs j
        SET status = {CANCELED_SQL}, cancel_requested = true, finished_at = now(), lease_expires_at = NULL,
            error = format('Upstream job %s %s.', s.culprit, s.culprit_status)
        FROM state s
        WHERE j.job_id = s.job_id AND j.status = {QUEUED_SQL} AND s.culprit IS NOT NULL AND NOT s.run_anyway
        RETURNING j.job_id, j.queue, s.culprit, s.culprit_status
    ),
    -- A retried job whose upstream jobs have not all finished waits again.
    waiting AS (
        UPDATE dl_jobs j SET available_at = {WAITING_SQL}
        FROM state s
        WHERE j.job_id = s.job_id AND j.status = {QUEUED_SQL} AND j.available_at <> {WAITING_SQL}
          AND NOT s.all_succeeded AND NOT s.all_finished AND (s.culprit IS NULL OR s.run_anyway)
        RETURNING j.job_id
    ),
    blamed AS (
        UPDATE dl_job_dependencies d SET canceled_it = true
        FROM canceled c WHERE d.job_id = c.job_id AND d.upstream_id = c.culprit
    ),
    -- A released job's requeue event says since when it is ready: its wait is counted from there.
    journal AS (
        INSERT INTO dl_job_events (job_id, queue, kind, payload)
        SELECT job_id, queue, {sql_literal(EventKind.CANCELED)},
               jsonb_build_object('reason', 'upstream', 'upstream', culprit, 'upstream_status', culprit_status)
        FROM canceled
        UNION ALL
        SELECT job_id, queue, 'requeue',
               jsonb_build_object('reason', CASE WHEN all_succeeded THEN 'upstream succeeded' ELSE 'upstream finished' END,
                                  'available_at', available_at)
        FROM ready
    )
    SELECT ARRAY(SELECT job_id FROM canceled) INTO done;
    RETURN done;
END
$$;
"""

# The dependency part of the ``dl_jobs_notify_upd`` trigger (one trigger, one function call
# per statement: a second trigger would cost every claim and complete statement about 0.05 ms
# more). ``ended``: jobs others wait for that finished; ``retried``: finished jobs queued again
# (by an operator, or brought back here) that others wait for or that wait themselves. A claim
# (all rows running) and a heartbeat cost one pass over the rows, without a probe or a join.
# Not for the statements the reaction itself runs (depth > 1): it goes down the graph in a
# loop, level by level (the jobs a level canceled or brought back are the next level's); a
# recursion as deep as a long chain would exhaust the stack and plan every level anew.
REACT_CALL = f"""
IF pg_trigger_depth() = 1 AND EXISTS (
    SELECT FROM new_values n
    WHERE n.status <> {RUNNING_SQL}
      AND (EXISTS (SELECT FROM dl_job_dependencies d WHERE d.upstream_id = n.job_id)
           OR (n.status = {QUEUED_SQL} AND EXISTS (SELECT FROM dl_job_dependencies d WHERE d.job_id = n.job_id)))
) THEN
    PERFORM dl_job_dependencies_react(
        ARRAY(SELECT n.job_id FROM new_values n WHERE n.status IN {FINISHED_SQL}),
        ARRAY(SELECT n.job_id FROM new_values n JOIN old_values o ON o.job_id = n.job_id
              WHERE n.status = {QUEUED_SQL} AND o.status IN {FINISHED_SQL})
    );
END IF;
"""
REACT_FUNCTION = f"""
CREATE OR REPLACE FUNCTION dl_job_dependencies_react(ended uuid[], retried uuid[]) RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    restored_now uuid[];
BEGIN
    LOOP
        WITH back AS (
            UPDATE dl_job_dependencies d SET canceled_it = false
            WHERE d.upstream_id = ANY (retried) AND d.canceled_it
            RETURNING d.job_id, d.upstream_id
        ),
        restored AS (
            UPDATE dl_jobs j
            SET status = {QUEUED_SQL}, available_at = {WAITING_SQL}, cancel_requested = false, finished_at = NULL, error = NULL
            FROM back b WHERE j.job_id = b.job_id AND j.status = {CANCELED_SQL}
            RETURNING j.job_id, j.queue, b.upstream_id
        ),
        journal AS (
            INSERT INTO dl_job_events (job_id, queue, kind, payload)
            SELECT job_id, queue, {sql_literal(EventKind.QUEUED)},
                   jsonb_build_object('reason', 'upstream retried', 'upstream', upstream_id, 'waiting', true)
            FROM restored
        )
        SELECT ARRAY(SELECT DISTINCT job_id FROM restored) INTO restored_now;
        ended := dl_job_dependencies_settle(ARRAY(
            SELECT d.job_id FROM dl_job_dependencies d WHERE d.upstream_id = ANY (ended)
            UNION SELECT unnest(retried) UNION SELECT unnest(restored_now)
        ));
        retried := restored_now;
        EXIT WHEN cardinality(ended) = 0 AND cardinality(retried) = 0;
    END LOOP;
END
$$;
"""
# What migrations install (a migration keeps its own copy of the text it ran); a change here needs
# a new migration, or tests/jobs/queue/test_dependency_rules.py finds the database running other code.
FUNCTIONS = SETTLE_FUNCTION + REACT_FUNCTION
