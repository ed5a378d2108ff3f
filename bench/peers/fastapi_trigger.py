"""The seed's own stack as a peer of the web tier: FastAPI with an async psycopg pool, doing the
trigger's insert (the job row and its journal row in one statement) and nothing else: no
authentication, no idempotency lookup, no request id or security headers.

    uvicorn --workers 2 --app-dir bench peers.fastapi_trigger:app     (PEER_DATABASE_URL set)
"""

import json
import os
import uuid
from contextlib import asynccontextmanager

from fastapi import FastAPI
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel, Field

pool = AsyncConnectionPool(os.environ["PEER_DATABASE_URL"], min_size=8, max_size=8, open=False)

INSERT = """
WITH job AS (
    INSERT INTO dl_jobs (job_id, queue, task, args, lock_key, producer)
    VALUES (%(job_id)s, %(queue)s, %(task)s, %(args)s, %(lock_key)s, 'fastapi')
    RETURNING job_id, queue, status
),
journal AS (
    INSERT INTO dl_job_events (job_id, queue, kind, payload)
    SELECT job_id, queue, 'queued', '{"producer": "fastapi"}'::jsonb FROM job
)
SELECT job_id, status::text FROM job
"""


@asynccontextmanager
async def lifespan(_app):
    await pool.open()
    yield
    await pool.close()


app = FastAPI(lifespan=lifespan)


class Trigger(BaseModel):
    queue: str = Field(min_length=1, max_length=200)
    task: str = Field(min_length=1, max_length=200)
    args: dict = {}
    lock_key: str = Field(min_length=1, max_length=200)


@app.post("/api/v1/jobs/trigger", status_code=201)
async def trigger(body: Trigger):
    async with pool.connection() as conn:
        cursor = await conn.execute(
            INSERT,
            {
                "job_id": uuid.uuid4(),
                "queue": body.queue,
                "task": body.task,
                "args": json.dumps(body.args),
                "lock_key": body.lock_key,
            },
        )
        job_id, status = await cursor.fetchone()
    return {"job_id": str(job_id), "status": status}
