import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext

from tests.conftest import ALL_DATABASES

pytestmark = ALL_DATABASES


def test_health_needs_no_auth_and_no_database(anonymous):
    with (
        CaptureQueriesContext(connections["default"]) as default,
        CaptureQueriesContext(connections["pipeline"]) as pipeline,
    ):
        response = anonymous.get("/health")

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert len(default) == len(pipeline) == 0


def test_status_reports_databases_migrations_and_versions(api):
    response = api.get("/status")

    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert set(body["versions"]) >= {"service", "django", "python"}
    for alias in ("default", "pipeline"):
        database = body["databases"][alias]
        assert database["reachable"] is True
        assert database["unapplied_migrations"] == []
        assert database["server_version"]


def test_status_is_503_when_a_database_is_unreachable(api, monkeypatch):
    from django.db import OperationalError

    def broken_cursor(*args, **kwargs):
        raise OperationalError("connection refused\nmore detail")

    monkeypatch.setattr(connections["pipeline"], "cursor", broken_cursor)

    response = api.get("/status")

    assert response.status_code == 503
    assert response.json()["databases"]["pipeline"] == {"reachable": False, "error": "connection refused"}


def test_status_says_when_the_server_turns_new_connections_away(api, monkeypatch):
    import psycopg

    pool = connections["pipeline"].pool
    monkeypatch.setattr(pool, "refused", psycopg.OperationalError("sorry, too many clients already\ndetail"))

    response = api.get("/status")

    assert response.status_code == 200  # still served, through the connections held
    database = response.json()["databases"]["pipeline"]
    assert database["reachable"] is True
    assert database["new_connections_refused"] == "sorry, too many clients already"
    assert "new_connections_refused" not in response.json()["databases"]["default"]


def test_status_requires_auth(anonymous):
    assert anonymous.get("/status").status_code == 401


def test_metrics_are_prometheus_text(api):
    response = api.get("/metrics")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    assert "python_info" in response.content.decode()


def test_openapi_schema_and_swagger_ui_are_served_offline(api):
    schema = api.get("/api/v1/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    assert "/api/v1/pipeline/files/register" in paths
    assert "/api/v1/pipeline/queues/{stage}/claim" in paths
    assert schema.json()["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"

    docs = api.get("/api/v1/docs")
    assert docs.status_code == 200
    html = docs.content.decode()
    assert "swagger-ui" in html
    assert "cdn" not in html.lower() and "https://" not in html.split("<body")[0]


@pytest.mark.parametrize("path", ["/api/v1/nope", "/api/v1/pipeline/files/a/b", "/metrics/extra"])
def test_unknown_api_paths_are_json_404(anonymous, path):
    response = anonymous.get(path)

    assert response.status_code == 404
    assert response.json()["code"] == "not_found"
    assert set(response.json()) == {"code", "message", "details"}


@pytest.mark.parametrize("method", ["post", "put", "delete", "patch"])
def test_health_answers_other_methods_with_405_in_the_error_shape(anonymous, method):
    response = getattr(anonymous, method)("/health")

    assert response.status_code == 405
    assert response.json()["code"] == "method_not_allowed" and response["Allow"] == "GET, HEAD"


def test_a_csrf_failure_on_the_api_is_in_the_error_shape(admin_user):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)

    response = client.post("/api/v1/jobs/trigger", {"queue": "q"}, content_type="application/json")

    assert response.status_code == 403
    assert response.json()["code"] in ("csrf_failed", "permission_denied")


def test_the_root_leads_to_the_console(anonymous):
    response = anonymous.get("/")

    assert response.status_code == 302
    assert response["Location"] == "/admin/"
