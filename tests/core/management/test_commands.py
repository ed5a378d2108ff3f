import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from pipeline_project.core.management.commands import ensureadmin
from pipeline_project.core.models import ApiToken
from tests.conftest import ALL_DATABASES

pytestmark = ALL_DATABASES


def run(*args) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_apitoken_create_prints_a_working_token_then_revoke_disables_it():
    key = run("apitoken", "create", "shard-worker-1").strip()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    assert client.get("/api/v1/pipeline/metrics/summary").status_code == 200

    token = ApiToken.objects.get()
    assert "shard-worker-1" in run("apitoken", "list") and key not in run("apitoken", "list")
    run("apitoken", "revoke", str(token.pk))

    assert client.get("/api/v1/pipeline/metrics/summary").status_code == 401
    assert "revoked" in run("apitoken", "list")


def test_apitoken_create_takes_scopes_and_list_shows_them():
    key = run("apitoken", "create", "operator-script", "--scope", "operate", "--scope", "read").strip()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")

    assert ApiToken.objects.get().scopes == ["read", "operate"]
    assert "read,operate" in run("apitoken", "list")
    assert client.post("/api/v1/queues/q/pause", {"create": True}, format="json").status_code == 200
    assert client.post("/api/v1/pipeline/files/register", {"filename": "f", "shards": [0]}).status_code == 403


def test_apitoken_create_refuses_an_unknown_scope():
    with pytest.raises(CommandError):
        run("apitoken", "create", "x", "--scope", "admin")
    assert not ApiToken.objects.exists()


def test_apitoken_revoke_unknown_id_fails():
    with pytest.raises(CommandError):
        run("apitoken", "revoke", "12345")


def test_ensureadmin_creates_admin_with_password_from_environment(monkeypatch, client):
    monkeypatch.setenv("ADMIN_PASSWORD", "correct-horse-battery")

    assert "created" in run("ensureadmin")
    assert client.login(username="admin", password="correct-horse-battery")

    monkeypatch.setenv("ADMIN_PASSWORD", "another-long-password")
    run("ensureadmin")
    assert client.login(username="admin", password="another-long-password")
    assert get_user_model().objects.filter(username="admin", is_superuser=True, is_staff=True).count() == 1


def test_ensureadmin_generates_and_saves_a_password(monkeypatch, tmp_path, client):
    monkeypatch.delenv("ADMIN_PASSWORD", raising=False)
    password_file = tmp_path / "admin_password"
    monkeypatch.setattr(ensureadmin, "PASSWORD_FILE", password_file)

    output = run("ensureadmin")

    password = password_file.read_text().strip()
    assert password in output
    assert oct(password_file.stat().st_mode & 0o777) == "0o600"
    assert client.login(username="admin", password=password)
    assert str(password_file) in run("ensureadmin")


def test_ensuredatabases_is_idempotent():
    output = run("ensuredatabases")

    assert "default: database" in output and "pipeline: database" in output
