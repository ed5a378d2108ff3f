"""Every JSON answer is written one way (DRF's renderer): the DRF views', the middleware's
errors, /health's, the sqlrs engine's lists and its NDJSON lines, the event streams' lines."""

import json

import pytest
from rest_framework.renderers import JSONRenderer

from pipeline_project.api.rendering import JSONAnswer, json_text
from tests.conftest import ALL_DATABASES
from tests.jobs.conftest import enqueue

pytestmark = ALL_DATABASES


def written_as_drf_writes(body: bytes) -> bool:
    text = body.decode().strip()
    return all(JSONRenderer().render(json.loads(line)).decode() == line for line in text.splitlines())


@pytest.mark.parametrize("value", [{"a": [1, "é", None]}, [], "x", 0, None])
def test_the_one_encoding_is_drfs(value):
    assert json_text(value) == (JSONRenderer().render(value).decode() if value is not None else "null")
    assert JSONAnswer(value)["Content-Type"] == "application/json"


@pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume asynchronous iterators")
def test_answers_from_views_middleware_probes_and_the_engine_are_spelled_alike(api):
    job = enqueue(task="t", queue="q", args={"name": "é", "n": [1, 2]})
    answers = {
        "a view": api.get("/api/v1/jobs"),
        "a view's error": api.get("/api/v1/jobs?bogus=1"),
        "no route": api.get("/api/v1/no-such-route"),
        "health": api.get("/health"),
        "engine list": api.get("/sqlrs/v1/names"),
        "engine NDJSON": api.get("/sqlrs/v1/names", HTTP_ACCEPT="application/x-ndjson"),
        "engine error": api.get("/sqlrs/v1/prepare-jobs/nope"),
        "job events": api.get(f"/api/v1/jobs/{job.job_id}/events?follow=false"),
    }

    statuses = {name: answer.status_code for name, answer in answers.items()}
    assert statuses == {**dict.fromkeys(answers, 200), "a view's error": 400, "no route": 404, "engine error": 404}
    spelled = {name: written_as_drf_writes(b"".join(a) if a.streaming else a.content) for name, a in answers.items()}
    assert all(spelled.values()), spelled
    assert answers["health"].content == b'{"status":"ok"}'
