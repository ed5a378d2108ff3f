"""The OpenAPI schema tells the truth: schemathesis calls every operation of the API with
generated (valid and invalid) requests and checks each answer against the schema, and that a
refused request wrote nothing. (tests/core/test_api_sweep.py sweeps the routes the schema does
not describe, and sqlrs's.)"""

import pytest
import schemathesis
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from pipeline_project.wsgi import application
from tests.conftest import ALL_DATABASES, ALL_DATABASES_COMMITTED
from tests.core.sweep import fingerprint
from tests.helpers import every_scope_token

CHECKS = [not_a_server_error, status_code_conformance, response_schema_conformance, content_type_conformance]
EXAMPLES = 20  # per operation and mode: enough to try every parameter's edges, bounded for the suite's time
SHARDS = 8  # every operation in one shard of them (its index modulo this): the suite's workers share them


@pytest.fixture
def bearer(transactional_db):  # committed: schemathesis calls the WSGI app, whose requests close connections
    key = every_scope_token("schemathesis")
    return {"Authorization": f"Bearer {key}"}


@ALL_DATABASES_COMMITTED
@pytest.mark.parametrize("shard", range(SHARDS))
def test_every_operation_answers_what_the_schema_says(bearer, settings, shard):
    settings.DL_EVENTS_MAX_FOLLOW_SEC = 1  # a followed stream of a job that never finishes ends soon
    schema = schemathesis.openapi.from_wsgi("/api/v1/schema?format=json", application, headers=bearer)
    operations = [result.ok() for result in schema.get_all_operations()]
    failures = {}

    for operation in operations[shard::SHARDS]:
        for mode in GenerationMode:  # valid requests, and requests that break the schema

            @given(case=operation.as_strategy(generation_mode=mode))
            @hypothesis_settings(
                max_examples=EXAMPLES,
                deadline=None,
                suppress_health_check=list(HealthCheck),
                database=None,
                derandomize=True,  # the same requests every run: CI fails on a change, not on a draw
            )
            def call(case):
                before = fingerprint()
                response = case.call_and_validate(headers=bearer, checks=CHECKS)
                if 400 <= response.status_code < 500:
                    changed = sorted(table for table, digest in fingerprint().items() if before.get(table) != digest)
                    assert not changed, f"{case.method} {case.formatted_path}: refused, yet it changed {changed}"

            try:
                call()
            except Exception as failure:  # noqa: BLE001 - every operation is tried; all failures are reported
                failures[f"{operation.label} ({mode.value})"] = str(failure)[:2000]

    assert len(operations) >= 20
    assert not failures, "\n\n".join(f"{label}:\n{text}" for label, text in failures.items())


@ALL_DATABASES
def test_every_operation_documents_its_errors_in_the_error_shape(api):
    document = api.get("/api/v1/schema?format=json").json()

    assert document["components"]["schemas"]["Error"]["required"] == ["code", "message", "details"]
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            statuses = set(operation["responses"])
            assert {"401", "403"} <= statuses, (method, path)
            if "requestBody" in operation:
                assert {"400", "413", "415"} <= statuses, (method, path)
            for status in statuses - {"200", "201"}:
                content = operation["responses"][status]["content"]["application/json"]["schema"]
                assert content == {"$ref": "#/components/schemas/Error"}, (method, path, status)
    bulk = document["paths"]["/api/v1/jobs/trigger/bulk"]["post"]["responses"]
    transition = document["paths"]["/api/v1/pipeline/stages/{stage}/{transition}"]["post"]["responses"]
    assert {"200", "201", "409"} <= set(bulk) and "409" in transition
