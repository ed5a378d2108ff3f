"""Helpers for the database-state tests: a state store of the test session, prepares run to their end."""

import functools
import json
import re
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import yaml
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

import jobs.dbstates.job_handlers  # noqa: F401  (registers sqlrs.prepare)
from jobs.dbstates import services
from jobs.dbstates.engine import images, postgres, statefs
from jobs.dbstates.engine.steps import PrepareRequest
from jobs.dbstates.models import PrepareEvent, PrepareJob
from jobs.runtime.config import WorkerConfig
from tests.helpers import asgi_request
from tests.jobs.helpers import FAST, worker_in_thread

IMAGE = "postgres:15"


def engine_worker(concurrency: int = 2):
    """The runworker runtime serving the engine's queue, in a thread."""
    return worker_in_thread(WorkerConfig.from_settings({"queue": {"sqlrs": concurrency}}, **FAST))


def wait_terminal(job_id: str, timeout: float = 60.0) -> PrepareJob:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = PrepareJob.objects.get(job_id=job_id)
        if job.is_terminal:
            return job
        time.sleep(0.02)
    raise AssertionError(f"prepare job {job_id} did not end within {timeout}s (status {job.status})")


def prepare(script_or_args, *, stdin=None, plan_only=False, image=IMAGE) -> PrepareJob:
    args = script_or_args if isinstance(script_or_args, list) else ["-f", str(script_or_args)]
    return services.prepare_job_submit(
        request=PrepareRequest(prepare_kind="psql", image_id=image, psql_args=args, stdin=stdin, plan_only=plan_only)
    )


@contextmanager
def short_state_store():
    """A state store of its own, removed after. Short: a server's Unix socket path (inside its
    data directory) must fit in 107 bytes."""
    with tempfile.TemporaryDirectory(prefix="sqlrs-", dir="/tmp") as root:
        yield Path(root)


def servers_stop() -> None:
    """Stop every server the engine left in the store (instances and job runtimes)."""
    root = statefs.root()
    for parent in (root / "instances", root / "jobs"):
        if parent.exists():
            for pid_file in parent.glob("**/postmaster.pid"):
                postgres.stop(pid_file.parent, immediate=True)


def cluster_state(data_dir: Path) -> str:
    """pg_controldata's "Database cluster state" of ``data_dir``: "shut down" after a clean stop,
    "in production" after a kill."""
    program = images.image_resolve(IMAGE).program("pg_controldata")
    output = subprocess.run(
        [program, str(data_dir)], capture_output=True, text=True, check=True, env={"LC_ALL": "C"}
    ).stdout
    return re.search(r"^Database cluster state:\s*(.+)$", output, re.MULTILINE).group(1).strip()


def server_log(data_dir: Path) -> str:
    """What the servers on ``data_dir`` logged, every start of them."""
    return postgres.log_path(data_dir).read_text(errors="replace")


def psql_run(token: str, instance_id: str, sql: str) -> list[dict]:
    """The events of a psql run of ``sql`` on an instance (``POST /sqlrs/v1/runs``)."""
    request = {"instance_ref": instance_id, "kind": "psql", "args": ["-At", "-c", sql]}
    status, headers, body = asgi_request("post", "/sqlrs/v1/runs", token=token, data=request)
    assert status == 200 and headers["Content-Type"] == "application/x-ndjson", body
    return [json.loads(line) for line in body.decode().splitlines()]


def script(directory, name: str, sql: str):
    path = directory / name
    path.write_text(sql)
    return path


def prepared(script_or_args, **kwargs) -> PrepareJob:
    """A prepare run to its end by an engine worker; asserts it succeeded."""
    with engine_worker():
        job = wait_terminal(prepare(script_or_args, **kwargs).job_id)
    assert job.status == "succeeded", job.error
    return job


def task_events(job_id: str) -> list[tuple[str, str]]:
    return list(
        PrepareEvent.objects.filter(job_id=job_id, type="task").order_by("seq").values_list("task_id", "status")
    )


HTTP_METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}
SPEC_PATH = Path(__file__).resolve().parents[3] / "docs" / "sqlrs-engine.openapi.yaml"


def _one_of_as_any_of(node) -> None:
    """Two of the file's oneOfs overlap, so nothing satisfies them: JSONValue's "number" and
    "integer" (an integer is both) and GET /config's ConfigValue and ConfigMap (any object).
    Each is read as the anyOf it means; the discriminated ones match one branch either way."""
    if isinstance(node, dict):
        if "oneOf" in node:
            node["anyOf"] = node.pop("oneOf")
        for child in node.values():
            _one_of_as_any_of(child)
    elif isinstance(node, list):
        for child in node:
            _one_of_as_any_of(child)


@functools.cache
def _spec() -> tuple[dict, Registry]:
    spec = yaml.safe_load(SPEC_PATH.read_text())
    _one_of_as_any_of(spec)
    resource = Resource.from_contents(spec, default_specification=DRAFT202012)
    return spec, Registry().with_resource("urn:sqlrs", resource)


def documented_methods(route: str) -> set[str]:
    """The methods the OpenAPI file gives ``route`` (upper case)."""
    spec, _registry = _spec()
    return {method.upper() for method in spec["paths"][route] if method in HTTP_METHODS}


def conforms(route: str, method: str, status: int, content_type: str, body: bytes) -> list:
    """Check a response against the OpenAPI file: the schema of ``route``'s ``method`` for
    ``status`` and ``content_type`` (each NDJSON line against the entry schema). Returns the
    parsed body (a list of lines for NDJSON)."""
    spec, registry = _spec()
    responses = spec["paths"][route][method]["responses"]
    assert str(status) in responses, f"{method.upper()} {route} may not answer {status}"
    content = responses[str(status)].get("content")
    if content is None:
        return []
    media = content_type.split(";")[0].strip()
    assert media in content, f"{method.upper()} {route} {status} is not documented as {media}"
    pointer = f"/paths/{route.replace('/', '~1')}/{method}/responses/{status}/content/{media.replace('/', '~1')}/schema"
    if media == "application/x-ndjson":
        json_content = content.get("application/json")
        if json_content is not None:  # a list: each line is one of the array's items
            pointer = pointer.replace("application~1x-ndjson/schema", "application~1json/schema/items")
        documents = [json.loads(line) for line in body.decode().splitlines()]
    else:
        documents = [json.loads(body)]
    validator = Draft202012Validator({"$ref": f"urn:sqlrs#{pointer}"}, registry=registry)
    for document in documents:
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(document)]
        assert not errors, f"{method.upper()} {route} {status}: {errors} in {document}"
    return documents if media == "application/x-ndjson" else documents[0]


def fake_liquibase(directory) -> str:
    """An executable that runs tests/jobs/dbstates/fake_liquibase.py with this interpreter."""
    program = directory / "liquibase"
    program.write_text(f'#!/bin/sh\nexec {sys.executable} {Path(__file__).with_name("fake_liquibase.py")} "$@"\n')
    program.chmod(0o755)
    return str(program)


def error_conforms(route: str, method: str, status: int, headers: dict, body: bytes) -> dict:
    """An error answer checked as sqlrs's ErrorResponse (JSON, never a page), and against the
    route's documented answer for ``status`` when the file has one. Returns the error."""
    assert headers.get("Content-Type", "").startswith("application/json"), (method, route, status, body[:200])
    error = json.loads(body)
    spec, registry = _spec()
    validator = Draft202012Validator({"$ref": "urn:sqlrs#/components/schemas/ErrorResponse"}, registry=registry)
    assert not list(validator.iter_errors(error)), (method, route, error)
    if str(status) in spec["paths"].get(route, {}).get(method, {}).get("responses", {}):
        conforms(route, method, status, headers["Content-Type"], body)
    return error


def engine_call(method: str, path: str, *, token: str | None = None, data=None, raw: bytes | None = None, **headers):
    """A request as a client outside the browser sends it: any method, CSRF checks enforced (as
    the real server enforces them). Returns (status, headers, body)."""
    return asgi_request(method, path, token=token, data=data, raw=raw, enforce_csrf_checks=True, **headers)


@contextmanager
def writer_between_reads(table: str, write, *, after: int = 1):
    """Commit ``write()`` from another thread (its own connection) right after this thread's
    ``after``-th SELECT on ``table``: a writer that lands between the reads of one answer.
    Yields a list that holds True once the writer ran."""
    from django.db import connection, connections

    seen, ran = [0], []

    def write_and_close():
        try:
            write()
        finally:
            connections.close_all()

    def wrapper(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if not ran and sql.lstrip().upper().startswith("SELECT") and f'"{table}"' in sql:
            seen[0] += 1
            if seen[0] == after:
                ran.append(True)
                writer = threading.Thread(target=write_and_close)
                writer.start()
                writer.join(timeout=30)
        return result

    with connection.execute_wrapper(wrapper):
        yield ran
