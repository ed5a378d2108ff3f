import pytest

from tests.conftest import ALL_DATABASES

pytestmark = ALL_DATABASES


def test_request_id_is_generated_and_returned(anonymous):
    response = anonymous.get("/health")

    assert len(response["X-Request-ID"]) == 32


def test_caller_request_id_is_kept_when_sane(anonymous):
    assert anonymous.get("/health", HTTP_X_REQUEST_ID="trace-123").headers["X-Request-ID"] == "trace-123"
    assert anonymous.get("/health", HTTP_X_REQUEST_ID="bad id\n").headers["X-Request-ID"] != "bad id\n"


@pytest.mark.parametrize(
    ("length", "status", "code"),
    [
        ("abc", 400, "invalid_content_length"),
        ("-5", 400, "invalid_content_length"),
        ("999999999", 413, "request_too_large"),
    ],
)
def test_content_length_is_checked_before_parsing(api, length, status, code):
    response = api.generic(
        "POST", "/api/v1/pipeline/files/register", b"{}", content_type="application/json", CONTENT_LENGTH=length
    )

    assert response.status_code == status
    assert response.json()["code"] == code


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/jobs?queue=%00",
        "/api/v1/jobs?lock_key=a%00b",
        "/api/v1/pipeline/queues/shard-worker?limit=%00",
        "/api/v1/jobs/%00",
    ],
)
def test_nul_in_the_url_is_a_400_before_any_query(api, path):
    response = api.get(path)

    assert response.status_code in (400, 404)
    assert set(response.json()) == {"code", "message", "details"}


def test_a_chunked_body_under_wsgi_gets_411(api):
    response = api.post(
        "/api/v1/jobs/trigger",
        b'{"queue": "q"}',
        content_type="application/json",
        HTTP_TRANSFER_ENCODING="chunked",
        CONTENT_LENGTH="",
    )

    assert response.status_code == 411 and response.json()["code"] == "length_required"
