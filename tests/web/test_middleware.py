import io
import json

import pytest

from tests.conftest import ALL_DATABASES
from tests.core.helpers import assert_error_shape, error_problem, missing_security_headers

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


@pytest.mark.parametrize(
    ("path", "headers", "status"),
    [
        ("/api/v1/jobs/trigger", {"CONTENT_LENGTH": "1000000000000"}, 413),
        ("/sqlrs/v1/prepare-jobs", {"CONTENT_LENGTH": "1000000000000"}, 413),
        ("/api/v1/jobs/trigger", {"CONTENT_LENGTH": "abc"}, 400),
        ("/api/v1/jobs/trigger", {"HTTP_TRANSFER_ENCODING": "chunked", "CONTENT_LENGTH": ""}, 411),
        ("/api/v1/jobs/trigger?queue=%00", {}, 400),
        ("/sqlrs/v1/health", {}, 405),  # a method the route does not take
        ("/api/v1/nope", {}, 404),
        ("/sqlrs/v1/health", {"HTTP_HOST": "evil.example"}, 400),  # raised by CommonMiddleware: a disallowed host
    ],
)
def test_refusals_carry_the_headers_every_answer_does(path, headers, status):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    usual = client.get("/health").headers
    expected = [name for name in usual if name.lower() not in ("content-type", "content-length")]

    response = client.generic("POST", path, b"{}", content_type="application/json", **headers)

    assert response.status_code == status
    assert_error_shape(response)
    assert [name for name in expected if name not in response.headers] == []
    assert not missing_security_headers(response.headers)


def test_the_wsgi_app_answers_a_huge_declared_length_without_reading_the_body(settings):
    from pipeline_project.wsgi import application

    class UnreadableBody:
        def read(self, *args):
            raise AssertionError("the body was read")

        readline = read

    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/api/v1/jobs/trigger",
        "QUERY_STRING": "",
        "SERVER_NAME": "localhost",
        "SERVER_PORT": "80",
        "HTTP_HOST": "localhost",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": "1000000000000",
        "wsgi.input": UnreadableBody(),
        "wsgi.url_scheme": "http",
        "wsgi.errors": io.StringIO(),
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
        "wsgi.version": (1, 0),
    }
    started = {}

    body = b"".join(application(environ, lambda status, headers: started.update(status=status, headers=headers)))

    assert started["status"].startswith("413")
    headers = dict(started["headers"])
    assert not missing_security_headers(headers)
    assert error_problem("/api/v1/jobs/trigger", 413, headers["Content-Type"], body) is None
    assert json.loads(body)["details"] == {"max_bytes": settings.MAX_REQUEST_BODY_BYTES, "content_length": 10**12}


@pytest.mark.parametrize("host", ["10.42.0.17:8000", "10.42.0.17", "[fd00::5]:8000"])
def test_health_answers_whatever_the_host_a_probe_sends(anonymous, host):
    response = anonymous.get("/health", HTTP_HOST=host)

    assert response.status_code == 200 and response.json() == {"status": "ok"}
    assert not missing_security_headers(response.headers)


@ALL_DATABASES
@pytest.mark.parametrize("path", ["/status", "/metrics"])
def test_the_probe_port_answers_status_and_metrics_with_no_token_and_any_host(anonymous, settings, path):
    settings.WEB_PROBE_PORT = "9000"

    on_probe_port = anonymous.get(path, SERVER_PORT="9000", HTTP_HOST="10.42.0.17:9000")
    on_users_port = anonymous.get(path, SERVER_PORT="8000")

    assert on_probe_port.status_code == 200, on_probe_port.content
    assert on_users_port.status_code == 401  # the users' port still asks for a token


def test_the_probe_port_serves_nothing_else_and_only_reads(anonymous, settings):
    settings.WEB_PROBE_PORT = "9000"

    other = anonymous.get("/admin/", SERVER_PORT="9000", HTTP_HOST="10.42.0.17:9000")
    write = anonymous.post("/status", SERVER_PORT="9000", HTTP_HOST="10.42.0.17:9000")

    assert other.status_code == 404 and other.json()["code"] == "not_found"
    assert write.status_code == 405 and write["Allow"] == "GET, HEAD"


def test_without_a_probe_port_no_port_skips_the_token(anonymous, settings):
    settings.WEB_PROBE_PORT = None

    assert anonymous.get("/status", SERVER_PORT="9000").status_code == 401
