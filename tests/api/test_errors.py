"""Every error on the API's paths is JSON in the path's shape, whatever part of the stack answers it:
Django's error views (400, 403, 404, 500, the CSRF failure), a plain view's 405, a view's or a
library's HTML error, DEBUG's technical pages. Other paths keep Django's pages."""

import pytest
from django.db import DatabaseError, IntegrityError, connection
from django.test import Client
from psycopg_pool import ConnectionPool

from pipeline_project.api.errors import api_exception_handler, error_body, error_shape, json_error, status_error
from pipeline_project.db.connections import connection_params
from tests.conftest import ALL_DATABASES
from tests.core.helpers import assert_error_shape, missing_security_headers

pytestmark = [ALL_DATABASES, pytest.mark.urls("tests.core.urls")]

JSON_PREFIXES = ["/api/test/", "/sqlrs/test/"]
RAISED_STATUS = {"permission": 403, "suspicious": 400, "bad-request": 400, "not-found": 404, "crash": 500}


@pytest.fixture
def client():
    return Client(raise_request_exception=False)


@pytest.mark.parametrize("prefix", JSON_PREFIXES)
@pytest.mark.parametrize(("kind", "status"), RAISED_STATUS.items())
def test_a_raised_error_is_json_in_the_path_shape(client, prefix, kind, status):
    response = client.get(f"{prefix}raise/{kind}")

    assert response.status_code == status
    assert_error_shape(response)
    assert not missing_security_headers(response.headers)


@pytest.mark.parametrize("prefix", JSON_PREFIXES)
def test_a_plain_view_405_keeps_its_allow_header(client, prefix):
    response = client.post(f"{prefix}get-only")

    assert response.status_code == 405
    body = assert_error_shape(response)
    assert body["code"] == "method_not_allowed" and "POST" in body["message"]
    assert "GET" in response["Allow"]


@pytest.mark.parametrize("prefix", JSON_PREFIXES)
def test_an_html_error_answer_becomes_json(client, prefix):
    response = client.get(f"{prefix}html-error")

    assert response.status_code == 400
    assert assert_error_shape(response)["code"] == "bad_request"


def test_an_error_a_view_answers_in_json_itself_is_left_alone(client):
    response = client.get("/api/test/own-json-error")

    assert response.status_code == 409 and response.json() == {"custom": True}


@pytest.mark.parametrize("path", ["/api/v1/nope", "/sqlrs/v1/nope", "/sqlrs/v2", "/sqlrs", "/health/x"])
def test_unknown_paths_are_json_404s(client, path):
    response = client.delete(path)

    assert response.status_code == 404
    assert assert_error_shape(response)["code"] == "not_found"


@pytest.mark.parametrize("path", ["/api/v1/nope", "/sqlrs/v1/nope", "/api/test/raise/crash", "/sqlrs/test/raise/crash"])
def test_debug_technical_pages_are_json_too(client, settings, path):
    settings.DEBUG = True

    response = client.get(path)

    assert response.status_code in (404, 500)
    assert_error_shape(response)


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
def test_sqlrs_health_never_answers_the_csrf_page(method):
    # A browser-like client: CSRF is enforced as in production.
    response = getattr(Client(enforce_csrf_checks=True), method)("/sqlrs/v1/health")

    assert 400 <= response.status_code < 500
    assert_error_shape(response)


def test_a_csrf_failure_on_sqlrs_is_in_sqlrs_shape(admin_user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)

    response = client.post("/sqlrs/v1/prepare-jobs", {}, content_type="application/json")

    assert response.status_code == 403
    assert set(assert_error_shape(response)) <= {"code", "message", "details"}


@pytest.mark.parametrize(("kind", "status"), RAISED_STATUS.items())
def test_other_paths_keep_django_pages(client, kind, status):
    response = client.get(f"/pages/raise/{kind}")

    assert response.status_code == status
    assert response["Content-Type"].startswith("text/html")


def test_error_shapes_by_path(settings):
    assert error_shape("/api/v1/jobs") is error_body
    assert error_shape("/api") is error_body
    assert error_shape("/health") is error_body
    assert error_shape("/healthz") is None  # a prefix is a path segment, not a string prefix
    assert error_shape("/admin/") is None and error_shape("/pipeline/") is None
    assert error_shape("/sqlrs/v1/x").__name__ == "sqlrs_error"

    settings.JSON_ERROR_PATHS = {**settings.JSON_ERROR_PATHS, "/api/v2/": "tests.api.test_errors.shout"}
    assert error_shape("/api/v2/x") is shout  # the most specific prefix wins
    assert error_shape("/api/v1/x") is error_body


def shout(code, message, details=None):
    return {"CODE": code.upper()}


def test_json_error_and_status_error_bodies():
    assert json_error("/api/x", 409, "c", "m", {"k": 1}).content == b'{"code":"c","message":"m","details":{"k":1}}'
    assert (
        json_error("/sqlrs/x", 409, "c", "m", {"k": 1}).content
        == b'{"code":"c","message":"m","details":"{\\"k\\": 1}"}'
    )
    assert json_error("/sqlrs/x", 404, "not_found", "m").content == b'{"code":"not_found","message":"m"}'

    assert status_error("/api/x", 405, method="PUT").content == (
        b'{"code":"method_not_allowed","message":"Method \\"PUT\\" not allowed.","details":{}}'
    )
    assert b'"code":"request_too_large"' in status_error("/api/x", 413).content
    assert b'"code":"unsupported_media_type"' in status_error("/api/x", 415).content
    assert status_error("/api/x", 599).status_code == 599


def test_a_database_that_cannot_answer_is_a_503_to_retry_not_a_crash():
    """No free connection in the pool (or the server down): the API says so, in its shape."""
    with (
        ConnectionPool(kwargs=connection_params(), min_size=1, max_size=1, timeout=0.05) as pool,
        pool.connection(),
        pytest.raises(DatabaseError) as refused,
        connection.wrap_database_errors,
    ):
        pool.getconn()

    response = api_exception_handler(refused.value, {})

    assert response.status_code == 503 and response["Retry-After"] == "1"
    assert response.data["code"] == "database_unavailable"
    assert response._has_been_logged  # the outage is logged once (pipeline_project.db.outages), not per request
    assert api_exception_handler(IntegrityError("duplicate key"), {}) is None  # a refusal stays a bug (500)
