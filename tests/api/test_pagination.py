"""Cursors and page sizes a client tampered with are 400s, never a 404 or a 500."""

import base64

import pytest

from tests.conftest import ALL_DATABASES
from tests.jobs.conftest import enqueue

pytestmark = ALL_DATABASES


def cursor(query: str) -> str:
    return base64.b64encode(query.encode()).decode()


@pytest.mark.parametrize(
    "value",
    [
        cursor("p=zz"),  # cD16eno=: a position that is not a job id
        cursor("p=1"),
        cursor("o=-1"),
        cursor("r=x"),
        "not-base64!",
        "%00",
        cursor("p=" + "9" * 5000),
    ],
)
def test_a_tampered_cursor_is_400(api, value):
    enqueue(task="t")

    response = api.get("/api/v1/jobs", {"cursor": value})

    assert response.status_code == 400, response.content
    assert response.json()["code"] == "validation_error"


@pytest.mark.parametrize("size", ["²", "٣", "0", "-1", "1e3", " 5", "5 ", "99999999999", "501"])
def test_a_limit_must_be_plain_digits_within_the_lists_maximum(api, size):
    assert api.get("/api/v1/jobs", {"limit": size}).status_code == 400


def test_a_genuine_cursor_pages_on(api):
    for _ in range(3):
        enqueue(task="t")

    first = api.get("/api/v1/jobs", {"limit": "2"}).json()
    second = api.get(first["next"]).json()

    assert len(first["results"]) == 2 and len(second["results"]) == 1


@pytest.mark.parametrize(
    "path", ["/api/v1/jobs", "/api/v1/ingestion/runs", "/api/v1/ingestion/items", "/api/v1/schedules"]
)
def test_every_cursor_list_pages_by_limit(api, path):
    answer = api.get(path, {"limit": "1"})

    assert answer.status_code == 200, answer.content
    assert set(answer.json()) == {"next", "previous", "results"}
    assert api.get(path, {"page_size": "1"}).json()["details"] == {"page_size": ["Unknown field."]}


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/jobs?limit=1&limit=2",
        "/api/v1/jobs?queue=a&queue=b",
        "/api/v1/pipeline/queues/shard-worker?limit=1&limit=2",
    ],
)
def test_a_parameter_given_twice_is_refused(api, path):
    answer = api.get(path)

    assert answer.status_code == 400
    name = path.split("?")[1].split("=")[0]
    assert answer.json()["details"] == {name: ["Given more than once; this parameter takes one value."]}


def test_a_parameter_that_takes_many_values_takes_them_repeated(api):
    enqueue(task="t")

    assert len(api.get("/api/v1/jobs?status=queued&status=running").json()["results"]) == 1
