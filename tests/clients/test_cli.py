"""``pipeline-client`` run as a script runs it: a subprocess against the service as deployed,
read by its --json output and its exit codes."""

import json
import uuid

import pytest
from pipeline_client.cli import exits

from tests.clients.helpers import json_lines, run_cli, token, worker
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.helpers import free_port

pytestmark = [ALL_DATABASES_COMMITTED, pytest.mark.slow]


def test_jobs_are_triggered_followed_to_their_end_and_retried_by_filter(service_url):
    queue, daemon, operator = "clients.cli", token(), token("read", "operate")
    with worker(queue):
        triggered = run_cli(
            "trigger",
            queue,
            "test.echo",
            "--lock-key",
            "a",
            "--args",
            '{"x": 1}',
            "--json",
            url=service_url,
            key=daemon,
        )
        assert triggered.returncode == exits.OK, triggered.stderr
        job = json.loads(triggered.stdout)
        assert job["created"] and job["status"] == "queued"

        followed = run_cli("follow", job["job_id"], "--json", url=service_url, key=daemon)
        assert followed.returncode == exits.OK, followed.stderr
        events = json_lines(followed.stdout)
        assert events[0]["kind"] == "queued" and events[-1]["kind"] == "done"

        failing = json.loads(
            run_cli(
                "--json",
                "trigger",
                queue,
                "test.fail",
                "--lock-key",
                "b",
                "--max-attempts",
                "1",
                url=service_url,
                key=daemon,
            ).stdout
        )
        followed = run_cli("follow", failing["job_id"], url=service_url, key=daemon)
        assert followed.returncode == exits.JOB_UNSUCCESSFUL
        assert followed.stdout.splitlines()[-1] == f"job {failing['job_id']} failed"

        retried = run_cli("retry", "--queue", queue, "--status", "failed", "--json", url=service_url, key=operator)
        assert retried.returncode == exits.OK, retried.stderr
        assert json.loads(retried.stdout)["changed"] == 1
    status = run_cli("status", failing["job_id"], "--json", url=service_url, key=daemon)
    assert json.loads(status.stdout)["attempt"] >= 1


def test_the_exit_codes_say_what_went_wrong(service_url):
    daemon = token()

    missing = run_cli("--json", "status", str(uuid.uuid4()), url=service_url, key=daemon)
    assert missing.returncode == exits.NOT_FOUND and missing.stdout == ""
    error = json.loads(missing.stderr)  # the error shape, with the status
    assert (set(error), error["status"], error["code"]) == ({"status", "code", "message", "details"}, 404, "not_found")
    refused = run_cli("trigger", "not a queue!", "test.echo", "--lock-key", "k", url=service_url, key=daemon)
    assert refused.returncode == exits.API_ERROR and "validation_error" in refused.stderr
    not_allowed = run_cli("queue", "pause", "clients.cli-codes", url=service_url, key=daemon)
    assert not_allowed.returncode == exits.NOT_ALLOWED and "operate" in not_allowed.stderr
    assert run_cli("status", str(uuid.uuid4()), url=service_url, key="pcp_wrong").returncode == exits.NOT_ALLOWED
    run_cli("tracking", "register", "codes", "0", url=service_url, key=daemon)
    illegal = run_cli("tracking", "move", "codes", "shard-worker", "done", "--shard", "0", url=service_url, key=daemon)
    assert illegal.returncode == exits.CONFLICT and "previous_stage_not_done" in illegal.stderr
    unreachable = run_cli(
        "--retries", "0", "status", str(uuid.uuid4()), url=f"http://127.0.0.1:{free_port()}", key=daemon
    )
    assert unreachable.returncode == exits.CONNECTION_FAILED and "ConnectError" in unreachable.stderr

    for usage in (
        ("trigger", "q", "t"),  # no --lock-key
        ("trigger", "q", "t", "--lock-key", "k", "--args", "[1]"),  # args not an object
        ("retry",),  # no filter
        ("tracking", "move", "codes", "shard-worker", "done"),  # no --shard
        ("tracking", "move", "codes", "event-ingest", "start"),
    ):
        assert run_cli(*usage, url=service_url, key=daemon).returncode == exits.USAGE, usage
    assert run_cli("status", str(uuid.uuid4()), url=service_url, key=None).returncode == exits.USAGE


def test_a_daemon_token_cancels_and_an_operator_token_pauses_and_resumes(service_url):
    daemon, operator, queue = token(), token("read", "operate"), "clients.cli-queue"
    job = json.loads(
        run_cli("trigger", queue, "test.echo", "--lock-key", "c", "--json", url=service_url, key=daemon).stdout
    )

    canceled = run_cli("cancel", job["job_id"], "--json", url=service_url, key=daemon)
    assert canceled.returncode == exits.OK and json.loads(canceled.stdout)["status"] == "canceled"

    paused = run_cli("--json", "queue", "pause", queue, url=service_url, key=operator)
    assert json.loads(paused.stdout) == {"queue": queue, "paused": True, "changed": True}
    typo = run_cli("--json", "queue", "pause", "clients.cli-queu", url=service_url, key=operator)
    assert (typo.returncode, json.loads(typo.stderr)["code"]) == (exits.NOT_FOUND, "queue_not_found")
    made = run_cli("--json", "queue", "pause", "clients.cli-new", "--create", url=service_url, key=operator)
    assert json.loads(made.stdout) == {"queue": "clients.cli-new", "paused": True, "changed": True}
    listed = json.loads(run_cli("queue", "list", "--json", url=service_url, key=operator).stdout)
    assert next(state for state in listed if state["name"] == queue)["paused"] is True
    resumed = run_cli("queue", "resume", queue, url=service_url, key=operator)  # for people: field: value lines
    assert resumed.returncode == exits.OK and resumed.stdout.splitlines() == [
        f"queue: {queue}",
        "paused: false",
        "changed: true",
    ]


def test_a_file_is_registered_and_its_shards_moved_stage_by_stage(service_url):
    daemon = token()
    registered = run_cli("tracking", "register", "20250101000000", "0", "1", "--json", url=service_url, key=daemon)
    assert json.loads(registered.stdout) == {"filename": "20250101000000", "shards": [0, 1], "created": True}

    moves = [
        ("event-ingest", "done", []),
        ("shard-splitter", "start", ["--shard", "0"]),
        ("shard-splitter", "done", ["--shard", "0"]),
        ("shard-worker", "fail", ["--shard", "0"]),
        ("shard-worker", "retry", ["--shard", "0"]),
    ]
    answers = []
    for stage, transition, shard in moves:
        moved = run_cli(
            "tracking", "move", "20250101000000", stage, transition, *shard, "--json", url=service_url, key=daemon
        )
        assert moved.returncode == exits.OK, moved.stderr
        answers.append(json.loads(moved.stdout))
    assert answers[0] == {"filename": "20250101000000", "updated_rows": 2}
    assert [answer["status"] for answer in answers[1:]] == ["started", "done", "failed", "new"]

    shown = json.loads(run_cli("tracking", "show", "20250101000000", "--json", url=service_url, key=daemon).stdout)
    assert [(shard["shard_splitter_status"], shard["shard_worker_status"]) for shard in shown["shards"]] == [
        ("done", "new"),
        ("new", "new"),
    ]
