import io
import json
import logging

import pytest
from rest_framework.test import APIClient

from pipeline_project.api.permissions import IsDaemonOrPermittedStaff
from pipeline_project.logging import JsonFormatter, RequestIdFilter, SecretMaskingFilter, mask_secrets, request_id_var
from tests.conftest import ALL_DATABASES


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("Authorization: Bearer pcp_abcDEF123-_xyz", "pcp_abcDEF123-_xyz"),
        ("connect postgres://app:s3cr3t@db:5432/control", "s3cr3t"),
        ("DATABASE_URL=postgresql://u:p%40ss@h/db", "p%40ss"),
        ("password=hunter2 user=bob", "hunter2"),
        ('{"token": "abc123"}', "abc123"),
        ("secret: 'topsecret'", "topsecret"),
    ],
)
def test_secrets_are_masked(text, secret):
    masked = mask_secrets(text)

    assert secret not in masked
    assert "***" in masked


def _format(record: logging.LogRecord) -> dict:
    for log_filter in (RequestIdFilter(), SecretMaskingFilter()):
        log_filter.filter(record)
    return json.loads(JsonFormatter().format(record))


def test_log_lines_are_json_with_request_id_and_masked_extras():
    token = request_id_var.set("req-42")
    try:
        record = logging.makeLogRecord(
            {
                "name": "x",
                "levelname": "INFO",
                "msg": "using %s",
                "args": ("Bearer pcp_secret",),
                "dsn": "postgres://a:b@c/d",
            }
        )
        line = _format(record)
    finally:
        request_id_var.reset(token)

    assert line["request_id"] == "req-42"
    assert line["level"] == "INFO" and line["logger"] == "x"
    assert line["message"] == "using Bearer ***"
    assert line["dsn"] == "postgres://a:***@c/d"
    assert "ts" in line


def test_exceptions_are_masked():
    try:
        raise ValueError("bad password=letmein")
    except ValueError:
        import sys

        record = logging.makeLogRecord({"name": "x", "levelname": "ERROR", "msg": "boom", "exc_info": sys.exc_info()})
    line = _format(record)

    assert "letmein" not in json.dumps(line)
    assert "ValueError" in line["exc_info"]


@ALL_DATABASES
def test_access_log_line_per_request(api, caplog):
    with caplog.at_level(logging.INFO, logger="pipeline.access"):
        api.get("/api/v1/pipeline/metrics/summary", HTTP_X_REQUEST_ID="abc")

    record = next(r for r in caplog.records if r.name == "pipeline.access")
    assert record.status == 200 and record.path == "/api/v1/pipeline/metrics/summary"
    assert record.request_id == "abc"
    assert record.duration_ms >= 0


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("GET /api/v1/jobs?token=pcp_AbC123xyz789 500", "pcp_AbC123xyz789"),
        ("GET /api/v1/jobs?access_token=letmein", "letmein"),
        ("x-api-key: 0123456789abcdef", "0123456789abcdef"),
        ("/files/pcp_AbC123xyz789/oops", "pcp_AbC123xyz789"),
    ],
)
def test_tokens_are_masked_wherever_they_appear(text, secret):
    assert secret not in mask_secrets(text)


def test_every_field_of_a_record_is_masked_even_objects_and_nested_ones():
    class Request:
        def __str__(self):
            return "<WSGIRequest: GET '/api/v1/jobs?token=pcp_AbC123xyz789'>"

    record = logging.makeLogRecord(
        {
            "name": "django.request",
            "levelname": "ERROR",
            "msg": "Internal Server Error: %s",
            "args": ("/api/v1/jobs",),
            "request": Request(),
            "extra_data": {"headers": {"Authorization": "Bearer pcp_AbC123xyz789"}, "tries": [1, "password=x1"]},
            "status_code": 500,
        }
    )
    line = json.dumps(_format(record))

    assert "pcp_AbC123xyz789" not in line and "x1" not in line
    assert '"status_code": 500' in line


@ALL_DATABASES
def test_a_real_500_with_a_token_in_the_query_string_logs_no_token(api, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("the database went away")

    # Before the query string is validated (which refuses parameters the view does not declare).
    monkeypatch.setattr(IsDaemonOrPermittedStaff, "has_permission", broken)
    client = APIClient(raise_request_exception=False)
    client.credentials(**api._credentials)
    handler = next(handler for handler in logging.getLogger().handlers if isinstance(handler, logging.StreamHandler))
    written = io.StringIO()
    previous = handler.setStream(written)  # the configured handler, with its filters and JSON formatter
    try:
        response = client.get("/api/v1/jobs?token=pcp_AbC123xyz789&access_token=hunter2")
    finally:
        handler.setStream(previous)

    assert response.status_code == 500
    assert response.json()["code"] == "server_error"  # the error shape, even now
    logged = written.getvalue()
    assert "Internal Server Error" in logged
    assert "pcp_AbC123xyz789" not in logged and "hunter2" not in logged
