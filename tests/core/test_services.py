import pytest

from pipeline_project.api.errors import NotFoundError
from pipeline_project.core import services
from pipeline_project.core.models import ApiToken
from tests.conftest import ALL_DATABASES

pytestmark = ALL_DATABASES


def test_each_token_is_unique():
    keys = {services.api_token_create(name="daemon")[1] for _ in range(20)}

    assert len(keys) == 20
    assert ApiToken.objects.count() == 20


def test_revoke_is_idempotent():
    token, _key = services.api_token_create(name="daemon")

    first = services.api_token_revoke(token_id=token.pk).revoked_at
    second = services.api_token_revoke(token_id=token.pk).revoked_at

    assert first is not None and first == second


def test_revoke_unknown_token():
    with pytest.raises(NotFoundError):
        services.api_token_revoke(token_id=999)


def test_mark_used_writes_at_most_once_a_minute(django_assert_num_queries):
    token, _key = services.api_token_create(name="daemon")
    with django_assert_num_queries(1):
        services.api_token_mark_used(token=token)
    with django_assert_num_queries(0):
        services.api_token_mark_used(token=token)
