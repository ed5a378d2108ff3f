"""Every method on every /sqlrs route, as a client outside the browser sends it (CSRF checks
enforced, as the real server enforces them): a method the route does not take is a 405 with
Allow in sqlrs's ErrorResponse; one it takes is answered in JSON, never a page or a 500; a path
under /sqlrs/v1 that names no route is sqlrs's 404 whatever the method."""

import json

import pytest
from django.urls import URLPattern

from jobs.dbstates.api import urls
from tests.conftest import ALL_DATABASES
from tests.jobs.dbstates.helpers import documented_methods, engine_call, error_conforms

pytestmark = ALL_DATABASES

ID = "0123456789abcdef0123456789abcdef"
# Each route of the engine: its path in the OpenAPI file, and a path that reaches it.
ROUTES = {
    "sqlrs-health": ("/v1/health", "/v1/health"),
    "sqlrs-config": ("/v1/config", "/v1/config"),
    "sqlrs-config-schema": ("/v1/config/schema", "/v1/config/schema"),
    "sqlrs-cache-status": ("/v1/cache/status", "/v1/cache/status"),
    "sqlrs-cache-explain": ("/v1/cache/explain/prepare", "/v1/cache/explain/prepare"),
    "sqlrs-prepare-jobs": ("/v1/prepare-jobs", "/v1/prepare-jobs"),
    "sqlrs-prepare-job": ("/v1/prepare-jobs/{jobId}", f"/v1/prepare-jobs/{ID}"),
    "sqlrs-prepare-job-cancel": ("/v1/prepare-jobs/{jobId}/cancel", f"/v1/prepare-jobs/{ID}/cancel"),
    "sqlrs-prepare-job-events": ("/v1/prepare-jobs/{jobId}/events", f"/v1/prepare-jobs/{ID}/events"),
    "sqlrs-tasks": ("/v1/tasks", "/v1/tasks"),
    "sqlrs-instances": ("/v1/instances", "/v1/instances"),
    "sqlrs-instance": ("/v1/instances/{instanceId}", f"/v1/instances/{ID}"),
    "sqlrs-names": ("/v1/names", "/v1/names"),
    "sqlrs-name": ("/v1/names/{name}", "/v1/names/dev"),
    "sqlrs-runs": ("/v1/runs", "/v1/runs"),
    "sqlrs-states": ("/v1/states", "/v1/states"),
    "sqlrs-state": ("/v1/states/{stateId}", f"/v1/states/{ID}"),
}
METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "PROPFIND"]


def test_the_table_names_every_route_of_the_engine():
    named = {pattern.name for pattern in urls.urlpatterns if isinstance(pattern, URLPattern)}
    assert named - {"sqlrs-no-route"} == set(ROUTES)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", sorted(ROUTES))
def test_every_method_on_every_route_answers_in_sqlrs_shape(api_token, name, method):
    route, path = ROUTES[name]
    taken = documented_methods(route)
    code, headers, body = engine_call(method, f"/sqlrs{path}", token=api_token)

    if method in taken or (method == "HEAD" and "GET" in taken):
        assert code < 500 and code != 405, (method, path, code, body[:300])
        if code >= 400 and method != "HEAD":
            error_conforms(route, method.lower(), code, headers, body)
        elif method != "HEAD":
            assert headers["Content-Type"].startswith(("application/json", "application/x-ndjson"))
        return
    assert code == 405, (method, path, code, body[:300])
    assert set(headers["Allow"].split(", ")) == (taken | {"HEAD"} if "GET" in taken else taken)
    if method != "HEAD":
        error = error_conforms(route, "get", code, headers, body)
        assert error["code"] == "method_not_allowed" and method in error["message"]


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
def test_health_answers_writes_with_a_405_not_a_csrf_page_with_or_without_a_session(method, admin_client):
    for cookies in ({}, admin_client.cookies):
        code, headers, body = engine_call(method, "/sqlrs/v1/health", Cookie=_cookie_header(cookies))
        assert code == 405 and headers["Allow"] == "GET, HEAD", (method, code, body[:300])
        assert error_conforms("/v1/health", "get", code, headers, body)["code"] == "method_not_allowed"


def test_health_needs_no_token_and_answers_a_head(api_token):
    code, _headers, body = engine_call("GET", "/sqlrs/v1/health")
    assert code == 200 and json.loads(body)["ok"] is True
    code, _headers, body = engine_call("HEAD", "/sqlrs/v1/health")
    assert code == 200 and body == b""


def test_a_staff_session_writing_without_a_csrf_token_gets_sqlrs_403(admin_client):
    code, headers, body = engine_call(
        "POST", "/sqlrs/v1/prepare-jobs", data={}, Cookie=_cookie_header(admin_client.cookies)
    )
    assert code == 403, body[:300]
    error = error_conforms("/v1/prepare-jobs", "post", code, headers, body)
    assert error["code"] == "forbidden" and "CSRF" in error["message"]


UNKNOWN = [
    "/sqlrs/v1/",
    "/sqlrs/v1/nothing",
    "/sqlrs/v1/health/",
    "/sqlrs/v1/prepare-jobs/",
    f"/sqlrs/v1/prepare-jobs/{ID}/tasks",
    "/sqlrs/v1/users/me",
    "/sqlrs/v1/organizations",
    f"/sqlrs/v1/source-blobs/sha256/{'0' * 64}",
]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("path", UNKNOWN)
def test_a_path_under_v1_that_names_no_route_is_sqlrs_404_whatever_the_method(api_token, path, method):
    for token in (api_token, None):
        code, headers, body = engine_call(method, path, token=token)
        assert code == 404, (method, path, code, body[:300])
        if method != "HEAD":
            error = error_conforms("/nowhere", method.lower(), code, headers, body)
            assert error["code"] == "not_found" and path in error["message"]


def _cookie_header(cookies) -> str:
    return "; ".join(f"{name}={morsel.value}" for name, morsel in cookies.items())
