"""The sweep: every route of every app whose errors are JSON (/api, /sqlrs, /health, /status,
/metrics), as the URL resolver lists them, called with every method, malformed, unknown,
oversized and wrongly typed bodies and bad query parameters, with and without auth. Every
answer is a 2xx or a 4xx, never a 500, a redirect or HTML; every error is JSON in its path's
shape; a refused request leaves both databases as they were.

Where an OpenAPI document describes the routes, schemathesis generates requests from it too:
the project's own schema (tests/core/test_schema.py) and sqlrs's (docs/sqlrs-engine.openapi.yaml,
here).
"""

import logging
from pathlib import Path

import pytest
import schemathesis
import yaml
from django.contrib.auth.models import User
from django.test import Client
from django.urls import Resolver404, resolve
from django.utils.crypto import get_random_string
from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as hypothesis_settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

import tests.jobs.processes.processors  # noqa: F401  (registers the test.* namespaces)
from ingestion import services as ingestion_services
from ingestion.models import Source
from jobs.dbstates.models import Instance, Name, PrepareJob, State
from jobs.processes import services as process_services
from jobs.queue import services as job_services
from pipeline_project.web.notifications import blocking_hub
from pipeline_project.wsgi import application
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.core.helpers import error_problem
from tests.core.sweep import (
    BAD_HEADERS,
    BAD_QUERIES,
    BODY_METHODS,
    HOSTILE_VALUES,
    METHODS,
    Body,
    Contract,
    Route,
    Sweep,
    bodies,
    converter_value,
    field_bodies,
    fingerprint,
    json_routes,
    route_shape,
    wrong_types,
)
from tests.helpers import every_scope_token
from tracking import services as tracking_services

pytestmark = ALL_DATABASES_COMMITTED

ROOT = Path(__file__).resolve().parents[2]
SQLRS_OPENAPI = ROOT / "docs" / "sqlrs-engine.openapi.yaml"
MAX_BODY_BYTES = 64 * 1024  # small, so the oversized body is cheap to send
SHARDS = 4  # each sweep in this many tests (a route or an operation by its index modulo this), for the suite's workers


@pytest.fixture
def sweep_settings(settings, tmp_path):
    settings.MAX_REQUEST_BODY_BYTES = settings.DATA_UPLOAD_MAX_MEMORY_SIZE = MAX_BODY_BYTES
    settings.DL_EVENTS_MAX_FOLLOW_SEC = 1
    settings.SQLRS_STATE_STORE = tmp_path / "state-store"
    settings.SQLRS_SCRIPT_ROOTS = [str(tmp_path)]
    yield settings
    blocking_hub.close()  # its LISTEN connections would keep the test database from being dropped


@pytest.fixture
def quiet_logs():
    """Thousands of access lines otherwise; a server error is recorded with its exception."""
    logging.disable(logging.CRITICAL)
    yield
    logging.disable(logging.NOTSET)


@pytest.fixture
def clients(db):
    """Who calls: a daemon with a token, an anonymous client, and a staff member without any
    permission in a browser session; CSRF is checked for all, as in production."""
    key = every_scope_token("sweep")
    staff = User.objects.create_user("sweep-staff", password="x", is_staff=True)
    browser = Client(enforce_csrf_checks=True, raise_request_exception=False)
    browser.force_login(staff)
    csrf = get_random_string(32)
    browser.cookies["csrftoken"] = csrf
    browser.defaults["HTTP_X_CSRFTOKEN"] = csrf
    return {
        "daemon": Client(enforce_csrf_checks=True, HTTP_AUTHORIZATION=f"Bearer {key}", raise_request_exception=False),
        "anonymous": Client(enforce_csrf_checks=True, raise_request_exception=False),
        "staff-without-permissions": browser,
    }


def existing_objects() -> dict[str, str]:
    """One object of each kind a route can name, by path parameter (per API where names clash)."""
    job = job_services.job_enqueue(spec=job_services.JobSpec(queue="default", task="sweep.task", lock_key="sweep"))
    filename = "20250101000000"
    tracking_services.file_register(filename=filename, shards=[0, 1])
    source, _created = Source.objects.get_or_create(name="sweep", defaults={"start_url": "http://127.0.0.1/"})
    run = ingestion_services.run_create(source_id=source.id)
    process_id = f"sweep-{get_random_string(8)}"
    process_services.process_put(namespace="test.quick", process_id=process_id, process={})
    prepare = PrepareJob.objects.create(
        job_id=get_random_string(32, "0123456789abcdef"), prepare_kind="psql", image_id="postgres:15", request={}
    )
    state = State.objects.create(
        state_id=get_random_string(64, "0123456789abcdef"),
        image_id="postgres:15",
        engine_version="15",
        prepare_kind="psql",
        prepare_args_normalized="",
        task_hash="0" * 64,
    )
    instance = Instance.objects.create(
        instance_id=get_random_string(32, "0123456789abcdef"),
        state=state,
        image_id="postgres:15",
        runtime_dir="/nonexistent",
    )
    name = Name.objects.create(
        name=f"sweep-{get_random_string(8)}", instance=instance, state_id=state.state_id, image_id="postgres:15"
    )
    return {
        "api:job_id": str(job.job_id),
        "api:queue": "default",
        "api:filename": filename,
        "api:stage": "shard-splitter",
        "api:transition": "done",
        "api:namespace": "test.quick",
        "api:process_id": process_id,
        "api:run_id": str(run.id),
        "sqlrs:job_id": prepare.job_id,
        "sqlrs:ref": instance.instance_id,
        "sqlrs:name": name.name,
        "sqlrs:state_id": state.state_id,
    }


def values_for(route: Route, objects: dict[str, str]) -> dict[str, str]:
    api = "sqlrs" if route.template.startswith("/sqlrs/") else "api"
    return {name: objects.get(f"{api}:{name}") or converter_value(kind) for name, kind in route.parameters}


def contract(project_schema: dict) -> Contract:
    return Contract.from_documents({"": project_schema, "/sqlrs": yaml.safe_load(SQLRS_OPENAPI.read_text())})


def test_the_sweep_reaches_every_app():
    templates = [route.template for route in json_routes()]

    for prefix in ["/api/v1/jobs", "/api/v1/pipeline/", "/api/v1/processes/", "/api/v1/ingestion/", "/sqlrs/v1/"]:
        assert any(template.startswith(prefix) for template in templates), prefix
    assert "/health" in templates and "/sqlrs/v1/health" in templates
    assert not any(template.startswith(("/admin/", "/pipeline/")) for template in templates)


@pytest.mark.parametrize("shard", range(SHARDS))
def test_every_route_every_method_every_bad_input(sweep_settings, clients, api, quiet_logs, shard):
    documented = contract(api.get("/api/v1/schema?format=json").json())
    routes = json_routes()[shard::SHARDS]

    with Sweep(contract=documented) as sweep:
        for route in routes:
            objects = existing_objects()
            sweep.rebaseline()
            _sweep_route(sweep, route, clients, objects, documented)

    print(f"\n{sweep.requests} requests over {len(routes)} routes")  # noqa: T201 - reports the figures
    assert routes and sweep.requests > 50 * len(routes)
    if sweep.findings:
        pytest.fail(sweep.report(), pytrace=False)


def _sweep_route(sweep: Sweep, route: Route, clients: dict, objects: dict, documented: Contract):
    daemon = clients["daemon"]
    values = values_for(route, objects)
    path = route.path(values)
    by_method = documented.properties(route)
    own = {name: spec for properties in by_method.values() for name, spec in properties.items()}
    route_bodies = bodies(MAX_BODY_BYTES, wrong_types(own or documented.all_properties()))
    for method in METHODS:
        for body in route_bodies if method in BODY_METHODS else [None]:
            sweep.send(daemon, route, "daemon", method, path, body)
    for method, properties in by_method.items():
        for body in field_bodies(properties):
            sweep.send(daemon, route, "daemon", method, path, body)
    for query in BAD_QUERIES:
        sweep.send(daemon, route, "daemon", "GET", f"{path}?{query}")
    sweep.send(daemon, route, "daemon", "HEAD", f"{path}?{BAD_QUERIES[0]}")
    for headers in BAD_HEADERS.values():
        sweep.send(daemon, route, "daemon", "GET", path, **headers)
        sweep.send(daemon, route, "daemon", "POST", path, route_bodies[1], **headers)
    malformed = route_bodies[2]
    for who in ("anonymous", "staff-without-permissions"):
        for method in METHODS:
            sweep.send(clients[who], route, who, method, path, malformed if method in BODY_METHODS else None)
    for name, kind in route.parameters:
        missing = route.path({**values, name: converter_value(kind)})
        for method in METHODS:
            sweep.send(daemon, route, "daemon", method, missing, malformed if method in BODY_METHODS else None)
        for hostile in HOSTILE_VALUES.values():
            hostile_path = route.path({**values, name: hostile})
            sweep.send(daemon, route, "daemon", "GET", hostile_path)
            sweep.send(daemon, route, "daemon", "POST", hostile_path, Body("empty-object", b"{}"))


# --- sqlrs's OpenAPI: schemathesis --------------------------------------------------------

EXAMPLES = 25  # per operation and mode


def sqlrs_schema():
    """sqlrs's contract served under /sqlrs by the WSGI app: the operations this engine routes."""
    document = yaml.safe_load(SQLRS_OPENAPI.read_text())
    document["servers"] = [{"url": "/sqlrs"}]
    document["paths"] = {path: operations for path, operations in document["paths"].items() if _routed(f"/sqlrs{path}")}
    schema = schemathesis.openapi.from_dict(document)
    schema.app = application
    return schema


def _routed(path: str) -> bool:
    try:
        resolve(route_shape(path).replace("{}", "x"))
    except Resolver404:
        return False
    return True


@pytest.mark.parametrize("shard", range(SHARDS))
def test_sqlrs_operations_answer_in_sqlrs_shape_and_refusals_write_nothing(sweep_settings, quiet_logs, shard):
    key = every_scope_token("schemathesis")
    headers = {"Authorization": f"Bearer {key}"}
    existing_objects()
    operations = [result.ok() for result in sqlrs_schema().get_all_operations()]
    failures = {}

    for operation in operations[shard::SHARDS]:
        for mode in GenerationMode:

            @given(case=operation.as_strategy(generation_mode=mode))
            @hypothesis_settings(
                max_examples=EXAMPLES,
                deadline=None,
                suppress_health_check=list(HealthCheck),
                database=None,
                derandomize=True,  # the same examples every run: a failure is reproduced by running it again
                phases=[Phase.generate],  # a failure is reported as found: shrinking it would cost minutes
            )
            def call(case):
                before = fingerprint()
                response = case.call(headers=headers)
                status, content_type = response.status_code, (response.headers.get("content-type") or [""])[0]
                where = f"{case.method} /sqlrs{case.formatted_path} body {str(case.body)[:300]!r}"
                assert status < 500, f"{where}: {status} {response.content[:300]!r}"
                if status >= 400 and case.method != "HEAD":
                    problem = error_problem(f"/sqlrs{case.formatted_path}", status, content_type, response.content)
                    assert problem is None, f"{where}: {problem}"
                    assert fingerprint() == before, f"{where}: refused, yet it wrote"

            try:
                call()
            except Unsatisfiable:
                pass  # nothing of the operation can be made invalid (GET /v1/health has no input)
            except Exception as failure:  # noqa: BLE001 - every operation is tried; all failures are reported
                failures[f"{operation.label} ({mode.value})"] = str(failure)[:1500]

    assert len(operations) >= 15
    assert not failures, "\n\n".join(f"{label}:\n{text}" for label, text in failures.items())
