import json
import logging

import pytest

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
