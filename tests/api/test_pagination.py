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


@pytest.mark.parametrize("size", ["²", "٣", "0", "-1", "1e3", " 5", "5 ", "99999999999"])
def test_a_page_size_must_be_plain_digits(api, size):
    assert api.get("/api/v1/jobs", {"page_size": size}).status_code == 400


def test_a_genuine_cursor_pages_on(api):
    for _ in range(3):
        enqueue(task="t")

    first = api.get("/api/v1/jobs", {"page_size": "2"}).json()
    second = api.get(first["next"]).json()

    assert len(first["results"]) == 2 and len(second["results"]) == 1
