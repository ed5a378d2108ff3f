import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from pipeline_project.core import services
from pipeline_project.core.models import ApiToken
from tests.conftest import ALL_DATABASES

pytestmark = ALL_DATABASES

PROTECTED = "/api/v1/pipeline/metrics/summary"


def client_with(header: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    return client


def test_valid_token_is_accepted_and_marked_used(api_token):
    response = client_with(f"Bearer {api_token}").get(PROTECTED)

    assert response.status_code == 200
    assert ApiToken.objects.get().last_used_at is not None


def test_tokens_are_stored_hashed():
    token, key = services.api_token_create(name="shard-worker-1")

    stored = ApiToken.objects.get(pk=token.pk)
    assert key not in {stored.key_hash, stored.key_prefix}
    assert stored.key_hash == ApiToken.hash_key(key)
    assert key.startswith(stored.key_prefix)


@pytest.mark.parametrize("header", ["Bearer", "Bearer a b", "Bearer nope", "Bearer pcp_\u00e9"])
def test_bad_tokens_are_401(header):
    response = client_with(header).get(PROTECTED)

    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Bearer"
    assert response.json()["code"] == "authentication_failed"


def test_revoked_token_is_401(api_token):
    services.api_token_revoke(token_id=ApiToken.objects.get().pk)

    response = client_with(f"Bearer {api_token}").get(PROTECTED)

    assert response.status_code == 401


@pytest.mark.parametrize(("header", "scheme"), [("Basic YWRtaW46YWRtaW4=", "Basic"), ("Token pcp_x", "Token")])
def test_other_schemes_are_refused_with_the_one_that_works(header, scheme):
    response = client_with(header).get(PROTECTED)

    assert (response.status_code, response["WWW-Authenticate"]) == (401, "Bearer")
    assert response.json()["code"] == "authentication_failed"
    assert response.json()["message"] == f"The '{scheme}' scheme is not accepted: send 'Authorization: Bearer <token>'."


def test_no_credentials_says_how_to_send_them():
    response = APIClient().get(PROTECTED)

    assert (response.status_code, response.json()["code"]) == (401, "not_authenticated")
    assert "send 'Authorization: Bearer <token>'" in response.json()["message"]


def test_staff_session_is_accepted(admin_client):
    assert admin_client.get(PROTECTED).status_code == 200


def test_non_staff_session_is_403(client):
    user = get_user_model().objects.create_user("operator", password="pw")
    client.force_login(user)

    response = client.get(PROTECTED)

    assert response.status_code == 403
    assert response.json()["code"] == "permission_denied"


def test_session_posts_need_csrf(admin_user):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(admin_user)

    response = client.post("/api/v1/pipeline/files/register", {"filename": "f", "shards": [0]}, format="json")

    assert response.status_code == 403
    assert "CSRF" in response.json()["message"]
