"""The sqlrs API's local subset, driven route by route through the ASGI handler; every answer is
checked against the schemas of sqlrs's OpenAPI file."""

import json

import pytest

from jobs.dbstates.models import Name
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.helpers import asgi_request
from tests.jobs.dbstates.helpers import conforms, engine_worker, script, wait_terminal

pytestmark = ALL_DATABASES_COMMITTED
NDJSON = {"Accept": "application/x-ndjson"}


class Engine:
    """Calls one route and checks its answer against the contract."""

    def __init__(self, token: str):
        self.token = token

    def __call__(self, method, path, route, *, status, data=None, token=True, **headers):
        code, response_headers, body = asgi_request(
            method, f"/sqlrs{path}", token=self.token if token else None, data=data, **headers
        )
        assert code == status, (method, path, code, body[:500])
        content_type = response_headers.get("Content-Type", "application/json")
        parsed = conforms(route, method, code, content_type, body) if body else None
        return parsed, response_headers


@pytest.fixture
def engine(api_token):
    return Engine(api_token)


def test_every_route_answers_as_the_contract_says(engine, tmp_path):
    health, _ = engine("get", "/v1/health", "/v1/health", status=200, token=False)
    assert health["ok"] is True
    engine("get", "/v1/prepare-jobs", "/v1/prepare-jobs", status=401, token=False)

    path = script(tmp_path, "schema.sql", "CREATE TABLE t (a int); INSERT INTO t VALUES (1);")
    request = {"prepare_kind": "psql", "image_id": "postgres:15", "psql_args": ["-f", str(path)]}
    with engine_worker():
        accepted, headers = engine("post", "/v1/prepare-jobs", "/v1/prepare-jobs", status=201, data=request)
        status_url = f"http://testserver/sqlrs/v1/prepare-jobs/{accepted['job_id']}"
        assert headers["Location"] == accepted["status_url"] == status_url
        assert accepted["events_url"] == f"{status_url}/events"
        job_id = accepted["job_id"]
        job = wait_terminal(job_id)
        planned, _ = engine(
            "post", "/v1/prepare-jobs", "/v1/prepare-jobs", status=201, data={**request, "plan_only": True}
        )
        wait_terminal(planned["job_id"])
    assert job.status == "succeeded"

    status, _ = engine("get", f"/v1/prepare-jobs/{job_id}", "/v1/prepare-jobs/{jobId}", status=200)
    assert status["result"]["instance_id"] == job.result["instance_id"]
    plan, _ = engine("get", f"/v1/prepare-jobs/{planned['job_id']}", "/v1/prepare-jobs/{jobId}", status=200)
    assert [task["type"] for task in plan["tasks"]] == ["plan", "resolve_image", "state_execute", "prepare_instance"]
    engine("get", "/v1/prepare-jobs/nope", "/v1/prepare-jobs/{jobId}", status=404)

    events, headers = engine("get", f"/v1/prepare-jobs/{job_id}/events", "/v1/prepare-jobs/{jobId}/events", status=200)
    assert events[0] == {**events[0], "type": "status", "status": "queued"} and events[-1]["status"] == "succeeded"
    assert headers["Accept-Ranges"] == "events"
    tail, headers = engine(
        "get", f"/v1/prepare-jobs/{job_id}/events", "/v1/prepare-jobs/{jobId}/events", status=206, Range="events=2-"
    )
    assert tail == events[2:] and headers["Content-Range"] == f"events 2-{len(events) - 1}/{len(events)}"
    engine(
        "get", f"/v1/prepare-jobs/{job_id}/events", "/v1/prepare-jobs/{jobId}/events", status=416, Range="events=999-"
    )

    jobs, _ = engine("get", "/v1/prepare-jobs", "/v1/prepare-jobs", status=200)
    assert {entry["job_id"] for entry in jobs} == {job_id, planned["job_id"]}
    lines, headers = engine("get", f"/v1/prepare-jobs?job={job_id[:6]}", "/v1/prepare-jobs", status=200, **NDJSON)
    assert headers["Content-Type"] == "application/x-ndjson" and [line["job_id"] for line in lines] == [job_id]
    tasks, _ = engine("get", f"/v1/tasks?job={job_id}", "/v1/tasks", status=200)
    assert [task["task_id"] for task in tasks] == ["plan", "resolve-image", "execute-0", "prepare-instance"]
    engine("get", "/v1/tasks", "/v1/tasks", status=200, **NDJSON)
    again, _ = engine("post", f"/v1/prepare-jobs/{job_id}/cancel", "/v1/prepare-jobs/{jobId}/cancel", status=200)
    assert again["status"] == "succeeded"

    instance_id, state_id = job.result["instance_id"], job.result["state_id"]
    Name.objects.create(name="dev", instance_id=instance_id, state_id=state_id, image_id=job.result["image_id"])
    instances, _ = engine("get", f"/v1/instances?id_prefix={instance_id[:8].upper()}", "/v1/instances", status=200)
    assert [entry["instance_id"] for entry in instances] == [instance_id] and instances[0]["name"] == "dev"
    engine("get", "/v1/instances?id_prefix=abc", "/v1/instances", status=400)
    engine("get", f"/v1/instances?state={state_id}", "/v1/instances", status=200, **NDJSON)
    engine("get", f"/v1/instances/{instance_id}", "/v1/instances/{instanceId}", status=200)
    _, headers = engine("get", "/v1/instances/dev", "/v1/instances/{instanceId}", status=307)
    assert headers["Location"] == f"http://testserver/sqlrs/v1/instances/{instance_id}"
    engine("get", "/v1/instances/missing", "/v1/instances/{instanceId}", status=404)
    names, _ = engine("get", f"/v1/names?instance={instance_id}", "/v1/names", status=200)
    assert names[0]["status"] == "active"
    engine("get", "/v1/names/dev", "/v1/names/{name}", status=200)
    engine("get", "/v1/names/none", "/v1/names/{name}", status=404)

    run = {"instance_ref": "dev", "kind": "psql", "args": ["-c", "SELECT a FROM t"]}
    output, _ = engine("post", "/v1/runs", "/v1/runs", status=200, data=run)
    assert output[0]["type"] == "start" and output[-1] == {**output[-1], "type": "exit", "exit_code": 0}
    assert any(line["type"] == "stdout" and line["data"].strip() == "1" for line in output)
    engine("post", "/v1/runs", "/v1/runs", status=409, data={**run, "args": ["-h", "elsewhere", "-c", "SELECT 1"]})
    engine("post", "/v1/runs", "/v1/runs", status=400, data={**run, "kind": "bash"})
    engine("post", "/v1/runs", "/v1/runs", status=404, data={**run, "instance_ref": "gone"})

    states, _ = engine("get", "/v1/states?kind=psql", "/v1/states", status=200)
    assert [entry["state_id"] for entry in states] == [state_id] and states[0]["refcount"] == 1
    engine("get", f"/v1/states?id_prefix={state_id[:10]}", "/v1/states", status=200, **NDJSON)
    engine("get", f"/v1/states/{state_id}", "/v1/states/{stateId}", status=200)
    engine("get", "/v1/states/unknown", "/v1/states/{stateId}", status=404)

    engine("get", "/v1/cache/status", "/v1/cache/status", status=200)
    explained, _ = engine("post", "/v1/cache/explain/prepare", "/v1/cache/explain/prepare", status=200, data=request)
    assert explained == {**explained, "decision": "hit", "matched_state_id": state_id}
    engine("post", "/v1/cache/explain/prepare", "/v1/cache/explain/prepare", status=400, data={**request, "x": 1})

    engine("get", "/v1/config", "/v1/config", status=200)
    set_value = {"path": "orchestrator.jobs.maxIdentical", "value": 5}
    changed, _ = engine("patch", "/v1/config", "/v1/config", status=200, data=set_value)
    assert changed == set_value
    got, _ = engine("get", "/v1/config?path=orchestrator.jobs.maxIdentical", "/v1/config", status=200)
    assert got["value"] == 5
    engine(
        "patch", "/v1/config", "/v1/config", status=400, data={"path": "orchestrator.jobs.maxIdentical", "value": -1}
    )
    removed, _ = engine(
        "delete", "/v1/config?path=orchestrator.jobs.maxIdentical&effective=true", "/v1/config", status=200
    )
    assert removed["value"] == 2
    schema, _ = engine("get", "/v1/config/schema", "/v1/config/schema", status=200)
    assert schema["type"] == "object"

    blocked, _ = engine("delete", f"/v1/states/{state_id}", "/v1/states/{stateId}", status=409)
    assert blocked["root"]["blocked"] == "has_descendants"
    preview, _ = engine(
        "delete", f"/v1/states/{state_id}?recurse=true&dry_run=true", "/v1/states/{stateId}", status=200
    )
    assert preview["outcome"] == "would_delete" and preview["root"]["children"][0]["kind"] == "instance"
    engine("delete", f"/v1/instances/{instance_id}?dry_run=true", "/v1/instances/{instanceId}", status=200)
    deleted, _ = engine("delete", f"/v1/states/{state_id}?recurse=true", "/v1/states/{stateId}", status=200)
    assert deleted["outcome"] == "deleted"
    engine("get", f"/v1/instances/{instance_id}", "/v1/instances/{instanceId}", status=404)
    gone, _ = engine("delete", f"/v1/prepare-jobs/{job_id}", "/v1/prepare-jobs/{jobId}", status=200)
    assert gone["root"] == {"kind": "job", "id": job_id}
    engine("delete", f"/v1/prepare-jobs/{job_id}", "/v1/prepare-jobs/{jobId}", status=404)


def test_bad_prepare_requests_are_400s_in_sqlrs_error_shape(engine, tmp_path):
    base = {"prepare_kind": "psql", "image_id": "postgres:15"}
    cases = [
        ({**base, "psql_args": ["-h", "db", "-f", "/x.sql"]}, "connection flag"),
        ({**base, "psql_args": ["-f", "relative.sql"]}, "must be absolute"),
        ({**base, "psql_args": ["-f", "-"]}, "stdin is required"),
        ({**base, "psql_args": ["-c", "SELECT 1"], "stdin": "x"}, "stdin is required with -f -, and only with it"),
        ({**base, "psql_args": ["-v", "ON_ERROR_STOP=0", "-c", "SELECT 1"]}, "ON_ERROR_STOP"),
        ({**base, "psql_args": ["-c", "SELECT 1", "mydb"]}, "positional"),
        ({**base, "image_id": "postgres:7", "psql_args": ["-c", "SELECT 1"]}, "unknown image"),
        ({**base, "prepare_kind": "lb", "liquibase_args": ["update"]}, "SQLRS_LIQUIBASE_EXEC"),
        ({**base, "psql_args": "-c SELECT 1"}, "psql_args: Expected a list of items"),
        ({**base, "psql_args": ["-f", str(tmp_path / "missing.sql")]}, "missing.sql"),
        ({**base, "psql_args": ["-c", "SELECT 1"], "surprise": True}, "surprise: Unknown field."),
    ]
    for body, expected in cases:
        error, _ = engine("post", "/v1/prepare-jobs", "/v1/prepare-jobs", status=400, data=body)
        assert error["code"] == "invalid_argument" and expected in error["message"], (body, error)
    code, _headers, body = asgi_request("post", "/sqlrs/v1/prepare-jobs", token=engine.token, data="[")
    assert code == 400 and json.loads(body)["code"] == "invalid_argument"
    code, _headers, body = asgi_request("get", "/sqlrs/v1/states", token="wrong")
    assert code == 401 and set(json.loads(body)) == {"code", "message"}
