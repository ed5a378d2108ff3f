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
