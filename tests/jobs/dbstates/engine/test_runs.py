"""psql and pgbench runs against instances: streamed output, refused connection flags, recovery."""

import asyncio
import json
import os
import signal
import time
from pathlib import Path

import pytest

from jobs.dbstates.engine import postgres, runs, statefs
from jobs.dbstates.models import Instance
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.helpers import asgi_request, wait_for
from tests.jobs.dbstates.helpers import prepared

pytestmark = ALL_DATABASES_COMMITTED


@pytest.fixture
def instance(db):
    job = prepared(["-c", "CREATE TABLE items (n int); INSERT INTO items SELECT generate_series(1, 3)"])
    return Instance.objects.get(instance_id=job.result["instance_id"])


def run(token, **request) -> list[dict]:
    status, headers, body = asgi_request("post", "/sqlrs/v1/runs", token=token, data=request)
    assert status == 200 and headers["Content-Type"] == "application/x-ndjson", body
    return [json.loads(line) for line in body.decode().splitlines()]


def test_psql_output_is_streamed_line_by_line_with_stderr_apart(api_token, instance):
    events = run(
        api_token,
        instance_ref=instance.instance_id,
        kind="psql",
        args=["-At", "-c", "SELECT n FROM items ORDER BY n", "-c", "SELECT nope"],
    )

    assert events[0] == {"type": "start", "ts": events[0]["ts"], "instance_id": instance.instance_id}
    assert [e["data"] for e in events if e["type"] == "stdout"] == ["1\n", "2\n", "3\n"]
    assert any("nope" in e["data"] for e in events if e["type"] == "stderr")
    assert events[-1]["type"] == "exit" and events[-1]["exit_code"] == 1  # the last command failed


def test_psql_steps_run_in_order_with_their_stdin_and_stop_at_a_failure(api_token, instance):
    events = run(
        api_token,
        instance_ref=instance.instance_id,
        kind="psql",
        args=[],
        steps=[
            {"args": ["-At", "-v", "ON_ERROR_STOP=1", "-f", "-"], "stdin": "SELECT 40 + 2;"},
            {"args": ["-v", "ON_ERROR_STOP=1", "-c", "SELECT broken"]},
            {"args": ["-c", "SELECT 'never'"]},
        ],
    )

    assert [e["data"] for e in events if e["type"] == "stdout"] == ["42\n"]
    assert events[-1]["exit_code"] != 0
    assert not any("never" in e.get("data", "") for e in events)


def test_pgbench_initializes_and_runs(api_token, instance):
    init = run(api_token, instance_ref=instance.instance_id, kind="pgbench", args=["-i", "-s", "1", "-q"])
    bench = run(api_token, instance_ref=instance.instance_id, kind="pgbench", args=["-c", "2", "-t", "20", "-n"])

    assert init[-1]["exit_code"] == 0 and bench[-1]["exit_code"] == 0
    assert any("number of transactions actually processed: 40/40" in e["data"] for e in bench if "data" in e)


def test_connection_flags_conflict(api_token, instance):
    for kind, args in [
        ("psql", ["-p", "5432"]),
        ("psql", ["--host=db"]),
        ("psql", ["-dpostgres"]),
        ("psql", ["postgresql://other/db"]),
        ("pgbench", ["-U", "root"]),
    ]:
        status, _headers, body = asgi_request(
            "post",
            "/sqlrs/v1/runs",
            token=api_token,
            data={"instance_ref": instance.instance_id, "kind": kind, "args": args},
        )
        assert status == 409 and json.loads(body)["code"] == "conflict", (args, body)


def test_a_run_on_an_instance_whose_server_was_killed_starts_it_again(api_token, instance):
    server = postgres.running(statefs.instance_dir(instance.instance_id))
    os.kill(server.pid, signal.SIGKILL)
    wait_for(lambda: not postgres.is_alive(server.pid), what="the server to die")
    time.sleep(0.1)  # its backends exit once they see the postmaster gone

    events = run(
        api_token, instance_ref=instance.instance_id, kind="psql", args=["-At", "-c", "SELECT count(*) FROM items"]
    )

    assert events[0]["type"] == "log" and "started again" in events[0]["data"]
    assert [e["data"] for e in events if e["type"] == "stdout"] == ["3\n"]
    instance.refresh_from_db()
    assert (
        instance.pid != server.pid and postgres.running(statefs.instance_dir(instance.instance_id)).pid == instance.pid
    )


def test_run_clients_never_run_as_root(api_token, instance):
    events = run(api_token, instance_ref=instance.instance_id, kind="psql", args=["-At", "-c", "\\! id -u"])

    assert [e["data"] for e in events if e["type"] == "stdout"] != ["0\n"]


def test_a_client_that_reads_slowly_holds_the_program_back_instead_of_its_output_piling_up():
    # 600 kB: read in a blink. (Not this interpreter: it runs as the server user, who may not reach it.)
    chatty = ["/usr/bin/seq", "100000"]
    plan = runs.RunPlan(instance_id="i-1", env=dict(os.environ), commands=[runs.RunCommand(chatty, None)])

    async def read_a_little() -> tuple[list[dict], bool]:
        events = runs.run_events(plan)
        first = [await anext(events), await anext(events)]
        await asyncio.sleep(1.5)  # it would have printed everything by now
        [program] = children_running(chatty)
        still_writing = postgres.is_alive(program)
        await events.aclose()  # the client hangs up: the program is killed
        return first, still_writing

    first, still_writing = asyncio.run(read_a_little())

    assert [event["type"] for event in first] == ["start", "stdout"]
    assert still_writing
    assert children_running(chatty) == []


def children_running(args: list[str]) -> list[int]:
    """This process's children (started from its main thread, as the event loop above runs) that run ``args``."""
    pid = os.getpid()
    children = [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    wanted = "\0".join(args) + "\0"
    return [child for child in children if _cmdline(child) == wanted]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text()
    except OSError:  # ended meanwhile
        return ""
