"""A prepare job's events stream follows the job: lines arrive as they are written (woken by
NOTIFY), and the stream closes at the terminal status."""

import asyncio
import json
import threading
import time

from django.db import connections

from jobs.dbstates.api.streams import run_response
from jobs.dbstates.engine import runs
from jobs.dbstates.models import PrepareEvent
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.helpers import asgi_get
from tests.jobs.dbstates.helpers import engine_worker, prepare, wait_terminal

pytestmark = ALL_DATABASES_COMMITTED


def test_the_stream_follows_a_running_job_to_its_end(api_token, settings):
    settings.DL_EVENTS_RECHECK_SEC = 30  # only the NOTIFY can wake the stream in time
    job = prepare(["-c", "SELECT pg_sleep(1)", "-c", "SELECT 'done' AS word"])
    received = {}

    def follow():
        try:
            received["response"] = asgi_get(f"/sqlrs/v1/prepare-jobs/{job.job_id}/events", token=api_token)
            received["at"] = time.monotonic()
        finally:
            connections.close_all()  # the view ran in this thread, on a connection of its own

    reader = threading.Thread(target=follow)
    reader.start()
    with engine_worker():
        ended = wait_terminal(job.job_id)
        finished_at = time.monotonic()
        reader.join(timeout=15)

    status, headers, body = received["response"]
    lines = [json.loads(line) for line in body.decode().splitlines()]
    stored = PrepareEvent.objects.filter(job_id=job.job_id).count()
    assert status == 200 and headers["Content-Type"] == "application/x-ndjson"
    assert len(lines) == stored and lines[-1] == {**lines[-1], "type": "status", "status": ended.status}
    assert any(line["type"] == "log" and "done" in line.get("message", "") for line in lines)
    assert received["at"] - finished_at < 5


def test_a_bounded_range_answers_that_part_of_the_stream(api_token):
    job = prepare(["-c", "SELECT 1"])
    with engine_worker():
        wait_terminal(job.job_id)
    status, headers, body = asgi_get(f"/sqlrs/v1/prepare-jobs/{job.job_id}/events", token=api_token, Range="events=1-2")
    lines = [json.loads(line) for line in body.decode().splitlines()]
    stored = list(PrepareEvent.objects.filter(job_id=job.job_id).order_by("seq"))
    assert status == 206 and headers["Content-Range"] == f"events 1-2/{len(stored)}"
    assert [line["type"] for line in lines] == [event.type for event in stored[1:3]]


def test_a_run_that_fails_in_the_engine_ends_with_an_error_event_and_is_logged(caplog):
    plan = runs.RunPlan(
        instance_id="i-1", env={}, commands=[runs.RunCommand(["/no/such/psql", "-c", "SELECT 1"], None)]
    )

    async def read() -> list[dict]:
        response = run_response(plan)
        return [json.loads(line) async for line in response.streaming_content]

    events = asyncio.run(read())

    assert [event["type"] for event in events] == ["start", "error"]
    assert events[-1]["error"]["code"] == "internal_error" and events[-1]["error"]["message"]
    assert any(record.message == "a run failed" and record.exc_info for record in caplog.records)
