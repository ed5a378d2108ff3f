"""The shape of every request to every /sqlrs route: a body or query string with a field missing,
unknown, wrong-typed, oversized or repeated is a 400 in sqlrs's ErrorResponse (checked against
the OpenAPI file) that names the field, before any service runs and with nothing written;
never a 500, never a page."""

import pytest

from jobs.dbstates.api.views import EngineView
from jobs.dbstates.engine import prepare_args, runs
from jobs.dbstates.models import EngineConfig, PrepareJob
from pipeline_project.api.accepts import accepts
from pipeline_project.api.serializers import RequestSerializer
from tests.conftest import ALL_DATABASES
from tests.jobs.dbstates.helpers import engine_call, error_conforms

pytestmark = ALL_DATABASES

JOB = "0123456789abcdef0123456789abcdef"
LONG = "x" * 100_000
PSQL = {"prepare_kind": "psql", "image_id": "postgres:15", "psql_args": ["-c", "SELECT 1"]}
RUN = {"instance_ref": "dev", "kind": "psql", "args": ["-c", "SELECT 1"]}
CONFIG = {"path": "orchestrator.jobs.maxIdentical", "value": 3}


def without(body: dict, name: str) -> dict:
    return {key: value for key, value in body.items() if key != name}


PREPARE_BODIES = [
    (without(PSQL, "image_id"), "image_id: This field is required."),
    (without(PSQL, "prepare_kind"), "prepare_kind: This field is required."),
    ({**PSQL, "surprise": 1}, "surprise: Unknown field."),
    ({**PSQL, "prepare_kind": 5}, "prepare_kind: Must be a JSON string."),
    ({**PSQL, "image_id": ["postgres:15"]}, "image_id: Must be a JSON string."),
    ({**PSQL, "image_id": None}, "image_id: This field may not be null."),
    ({**PSQL, "image_id": ""}, "image_id: This field may not be blank."),
    ({**PSQL, "psql_args": "-c SELECT 1"}, "psql_args: Expected a list of items"),
    ({**PSQL, "psql_args": ["-c", 1]}, "psql_args.1: Must be a JSON string."),
    ({**PSQL, "stdin": 5}, "stdin: Must be a JSON string."),
    ({**PSQL, "liquibase_env": ["A"]}, "liquibase_env: Expected a dictionary"),
    ({**PSQL, "liquibase_env": {"LIQUIBASE_A": 1}}, "liquibase_env.LIQUIBASE_A: Must be a JSON string."),
    ({**PSQL, "work_dir": 5}, "work_dir: Must be a JSON string."),
    ({**PSQL, "liquibase_exec": False}, "liquibase_exec: Must be a JSON string."),
    ({**PSQL, "image_id": LONG}, "image_id: Ensure this field has no more than"),
    ({**PSQL, "prepare_kind": LONG}, "prepare_kind: Ensure this field has no more than"),
    ({**PSQL, "psql_args": ["-c"] * (prepare_args.MAX_ARGS + 1)}, "psql_args: Ensure this field has no more than"),
    (
        {**PSQL, "psql_args": ["-c", "x" * (prepare_args.MAX_ARG_BYTES + 1)]},
        "psql_args.1: Ensure this field has no more",
    ),
    ({**PSQL, "source_manifest": {"workspace_ref": {}}}, "source_manifest is for remote engines"),
    ({**PSQL, "liquibase_args": ["update"]}, "psql prepares do not take liquibase_args"),
    ({**PSQL, "prepare_kind": "bash"}, "prepare_kind must be one of psql, lb"),
    (without(PSQL, "psql_args"), "psql_args must be an array of strings"),
]
NOT_OBJECTS = [("[]", "Expected a dictionary"), ('"x"', "Expected a dictionary"), ("1", "Expected a dictionary")]
NOT_OBJECTS += [("null", "No data provided"), ("{", "JSON parse error"), ("", "This field is required")]


@pytest.mark.parametrize(("body", "expected"), PREPARE_BODIES)
@pytest.mark.parametrize("route", ["/v1/prepare-jobs", "/v1/cache/explain/prepare"])
def test_a_prepare_or_explain_body_of_the_wrong_shape_is_a_400_naming_the_field(api_token, route, body, expected):
    if route == "/v1/prepare-jobs" and "plan_only" not in body:
        body = {**body, "plan_only": False}
    error = bad_request("post", route, route, api_token, data=body)
    assert expected in error["message"], error
    assert not PrepareJob.objects.exists()


def test_plan_only_is_a_json_boolean_and_only_a_prepare_takes_it(api_token):
    error = bad_request("post", "/v1/prepare-jobs", "/v1/prepare-jobs", api_token, data={**PSQL, "plan_only": "yes"})
    assert "plan_only: Must be a JSON boolean." in error["message"]
    route = "/v1/cache/explain/prepare"
    error = bad_request("post", route, route, api_token, data={**PSQL, "plan_only": True})
    assert "plan_only: Unknown field." in error["message"]


RUN_BODIES = [
    (without(RUN, "instance_ref"), "instance_ref: This field is required."),
    (without(RUN, "kind"), "kind: This field is required."),
    ({**RUN, "user": "root"}, "user: Unknown field."),
    ({**RUN, "instance_ref": 7}, "instance_ref: Must be a JSON string."),
    ({**RUN, "kind": ["psql"]}, "kind: Must be a JSON string."),
    ({**RUN, "command": 1}, "command: Must be a JSON string."),
    ({**RUN, "args": [True]}, "args.0: Must be a JSON string."),
    ({**RUN, "stdin": {}}, "stdin: Must be a JSON string."),
    ({**RUN, "steps": "SELECT 1"}, "steps: Expected a list of items"),
    ({**RUN, "steps": [{"args": "-c"}]}, "steps.0.args: Expected a list of items"),
    ({**RUN, "steps": [{"args": [], "shell": "sh"}]}, "steps.0.shell: Unknown field."),
    ({**RUN, "steps": [{"args": []}] * (runs.MAX_STEPS + 1)}, "steps: Ensure this field has no more than"),
    ({**RUN, "instance_ref": LONG}, "instance_ref: Ensure this field has no more than"),
    ({**RUN, "kind": "bash"}, "kind must be one of psql, pgbench"),
]


@pytest.mark.parametrize(("body", "expected"), RUN_BODIES + NOT_OBJECTS)
def test_a_run_body_of_the_wrong_shape_is_a_400_naming_the_field(api_token, body, expected):
    if isinstance(body, str):
        error = bad_request("post", "/v1/runs", "/v1/runs", api_token, raw=body.encode())
    else:
        error = bad_request("post", "/v1/runs", "/v1/runs", api_token, data=body)
    assert expected in error["message"], error


@pytest.mark.parametrize(("raw", "expected"), NOT_OBJECTS)
def test_a_prepare_body_that_is_not_an_object_is_a_400(api_token, raw, expected):
    error = bad_request("post", "/v1/prepare-jobs", "/v1/prepare-jobs", api_token, raw=raw.encode())
    assert expected in error["message"], error


CONFIG_BODIES = [
    (without(CONFIG, "value"), "value: This field is required."),
    (without(CONFIG, "path"), "path: This field is required."),
    ({**CONFIG, "effective": True}, "effective: Unknown field."),
    ({**CONFIG, "path": ["orchestrator"]}, "path: Must be a JSON string."),
    ({**CONFIG, "path": LONG}, "path: Ensure this field has no more than"),
    ({**CONFIG, "value": -1}, "invalid config value at orchestrator.jobs.maxIdentical"),
]


@pytest.mark.parametrize(("body", "expected"), CONFIG_BODIES)
def test_a_config_change_of_the_wrong_shape_is_a_400_and_changes_nothing(api_token, body, expected):
    error = bad_request("patch", "/v1/config", "/v1/config", api_token, data=body)
    assert expected in error["message"], error
    assert not EngineConfig.objects.exists()


def test_null_is_a_config_value_like_any_other(api_token):
    code, _headers, _body = engine_call(
        "patch", "/sqlrs/v1/config", token=api_token, data={"path": "cache.capacity.maxBytes", "value": None}
    )
    assert code == 200 and EngineConfig.objects.get().document == {"cache": {"capacity": {"maxBytes": None}}}


BODYLESS = [
    ("post", f"/v1/prepare-jobs/{JOB}/cancel", "/v1/prepare-jobs/{jobId}/cancel"),
    ("delete", f"/v1/prepare-jobs/{JOB}", "/v1/prepare-jobs/{jobId}"),
    ("delete", f"/v1/instances/{JOB}", "/v1/instances/{instanceId}"),
    ("delete", f"/v1/states/{JOB}", "/v1/states/{stateId}"),
    ("delete", "/v1/config?path=orchestrator", "/v1/config"),
]


@pytest.mark.parametrize(("method", "path", "route"), BODYLESS)
def test_a_request_that_takes_no_body_refuses_one_rather_than_ignoring_it(api_token, method, path, route):
    error = bad_request(method, path, route, api_token, data={"recurse": True})
    assert "recurse: Unknown field." in error["message"]
    error = bad_request(method, path, route, api_token, raw=b"[1]")
    assert "Expected a dictionary" in error["message"]


QUERIES = [
    ("get", "/v1/health?verbose=1", "/v1/health", "verbose: Unknown field."),
    ("get", "/v1/cache/status?fresh=1", "/v1/cache/status", "fresh: Unknown field."),
    ("get", "/v1/config/schema?path=a", "/v1/config/schema", "path: Unknown field."),
    ("get", "/v1/config?path=a&path=b", "/v1/config", "path: Given more than once."),
    ("get", "/v1/config?effective=perhaps", "/v1/config", "effective: Must be a valid boolean."),
    ("get", f"/v1/config?path={LONG[:300]}", "/v1/config", "path: Ensure this field has no more than"),
    ("delete", "/v1/config", "/v1/config", "path: This field is required."),
    ("delete", "/v1/config?path=a&effective=2", "/v1/config", "effective: Must be a valid boolean."),
    ("get", "/v1/prepare-jobs?jobs=abc", "/v1/prepare-jobs", "jobs: Unknown field."),
    ("get", "/v1/prepare-jobs?job=a&job=b", "/v1/prepare-jobs", "job: Given more than once."),
    ("get", f"/v1/prepare-jobs?job={LONG[:301]}", "/v1/prepare-jobs", "job: Ensure this field has no more than"),
    ("get", f"/v1/prepare-jobs/{JOB}?verbose=1", "/v1/prepare-jobs/{jobId}", "verbose: Unknown field."),
    ("delete", f"/v1/prepare-jobs/{JOB}?dryrun=true", "/v1/prepare-jobs/{jobId}", "dryrun: Unknown field."),
    ("delete", f"/v1/prepare-jobs/{JOB}?force=maybe", "/v1/prepare-jobs/{jobId}", "force: Must be a valid boolean."),
    ("delete", f"/v1/prepare-jobs/{JOB}?force=1&force=0", "/v1/prepare-jobs/{jobId}", "force: Given more than once."),
    ("post", f"/v1/prepare-jobs/{JOB}/cancel?force=1", "/v1/prepare-jobs/{jobId}/cancel", "force: Unknown field."),
    ("get", f"/v1/prepare-jobs/{JOB}/events?after=3", "/v1/prepare-jobs/{jobId}/events", "after: Unknown field."),
    ("get", "/v1/tasks?job_id=x", "/v1/tasks", "job_id: Unknown field."),
    ("get", "/v1/instances?id_prefix=abc", "/v1/instances", "id_prefix must be at least 8 hex characters"),
    ("get", f"/v1/instances?image={LONG[:301]}", "/v1/instances", "image: Ensure this field has no more than"),
    ("get", "/v1/instances?name=dev", "/v1/instances", "name: Unknown field."),
    ("get", f"/v1/instances/{JOB}?x=1", "/v1/instances/{instanceId}", "x: Unknown field."),
    ("delete", f"/v1/instances/{JOB}?recurse=true", "/v1/instances/{instanceId}", "recurse: Unknown field."),
    ("delete", f"/v1/instances/{JOB}?dry_run=y&dry_run=n", "/v1/instances/{instanceId}", "dry_run: Given more"),
    ("get", "/v1/names?name=dev", "/v1/names", "name: Unknown field."),
    ("get", "/v1/names?state=a&state=a", "/v1/names", "state: Given more than once."),
    ("get", "/v1/names/dev?x=", "/v1/names/{name}", "x: Unknown field."),
    ("post", "/v1/runs?timeout=5", "/v1/runs", "timeout: Unknown field."),
    ("get", "/v1/states?parent=x", "/v1/states", "parent: Unknown field."),
    ("get", "/v1/states?id_prefix=zzzzzzzz", "/v1/states", "id_prefix must be at least 8 hex characters"),
    ("get", f"/v1/states/{JOB}?x=1", "/v1/states/{stateId}", "x: Unknown field."),
    ("delete", f"/v1/states/{JOB}?recurse=everything", "/v1/states/{stateId}", "recurse: Must be a valid boolean."),
    ("delete", f"/v1/states/{JOB}?cascade=true", "/v1/states/{stateId}", "cascade: Unknown field."),
]


@pytest.mark.parametrize(("method", "path", "route", "expected"), QUERIES)
def test_a_bad_query_string_is_a_400_naming_the_parameter(api_token, method, path, route, expected):
    data = RUN if route == "/v1/runs" else None
    error = bad_request(method, path, route, api_token, data=data)
    assert expected in error["message"], error


def test_flags_and_filters_read_as_sqlrs_reads_them(api_token):
    for value in ("1", "t", "TRUE", "True", "0", "f", "false", ""):
        code, _headers, body = engine_call("delete", f"/sqlrs/v1/states/{JOB}?dry_run={value}", token=api_token)
        assert code == 404, (value, body)  # read, then the state is looked for
    code, _headers, body = engine_call("get", "/sqlrs/v1/prepare-jobs?job=", token=api_token)
    assert (code, body) == (200, b"[]")  # an empty filter is no filter


def test_a_handler_that_declares_no_request_does_not_load():
    with pytest.raises(TypeError, match=r"Careless\.post does not declare its request"):

        class Careless(EngineView):
            def post(self, request):
                return None

    class Careful(EngineView):
        @accepts(body=RequestSerializer)
        def post(self, request, *, body):
            return None

    assert Careful.post.accepts == (None, RequestSerializer)


def bad_request(method: str, path: str, route: str, token: str, **request) -> dict:
    code, headers, body = engine_call(method, f"/sqlrs{path}", token=token, **request)
    assert code == 400, (method, path, code, body[:300])
    error = error_conforms(route, method, code, headers, body)
    assert error["code"] == "invalid_argument", error
    return error
