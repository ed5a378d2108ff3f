"""The API answers JSON whatever the client asks for; OPTIONS is not an operation."""

import pytest

from tests.conftest import ALL_DATABASES
from tests.jobs.conftest import enqueue

pytestmark = ALL_DATABASES


@pytest.mark.parametrize("accept", ["text/html", "application/xml", "text/html;q=0.9, */*;q=0.1", "garbage/;;"])
def test_any_accept_header_gets_json(api, accept):
    ok = api.get("/api/v1/jobs", HTTP_ACCEPT=accept)
    missing = api.get("/api/v1/jobs/00000000-0000-0000-0000-000000000000", HTTP_ACCEPT=accept)

    assert ok.status_code == 200 and ok["Content-Type"] == "application/json"
    assert missing.status_code == 404 and set(missing.json()) == {"code", "message", "details"}


def test_the_events_stream_is_served_to_a_client_asking_for_ndjson(api):
    enqueued = enqueue(task="t")

    response = api.get(f"/api/v1/jobs/{enqueued.job_id}/events?follow=false", HTTP_ACCEPT="application/x-ndjson")

    assert response.status_code == 200 and response["Content-Type"] == "application/x-ndjson"


@pytest.mark.parametrize("path", ["/api/v1/docs", "/api/v1/schema", "/api/v1/jobs", "/api/v1/pipeline/metrics/summary"])
def test_options_is_405_in_the_error_shape(api, path):
    response = api.options(path)

    assert response.status_code == 405
    assert response.json()["code"] == "method_not_allowed"
