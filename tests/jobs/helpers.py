"""Helpers shared by the jobs tests."""

import uuid

from tests.db_helpers import raw_connection


def insert_unclaimable(queue="default") -> uuid.UUID:
    """A job no claim can take, written the way only a direct INSERT (an older version, a script) could:
    its attempt counter is at the integer limit, so the claim's ``attempt + 1`` is out of range."""
    job_id = uuid.uuid4()
    with raw_connection("default", autocommit=True) as conn:
        conn.execute(
            "INSERT INTO dl_jobs (job_id, queue, task, lock_key, priority, attempt, max_attempts) "
            "VALUES (%s, %s, 't', %s, 0, 2147483647, 2147483647)",
            [job_id, queue, f"unclaimable-{job_id}"],
        )
    return job_id
