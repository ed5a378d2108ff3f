import asyncio

import pytest
import uvloop
from django.conf import settings
from django.test import TransactionTestCase
from rest_framework.test import APIClient

from tests.db_helpers import empty_written_tables
from tests.helpers import every_scope_token


def pytest_configure(config):
    # Async views, streams and subprocesses run in the tests under the event loop the deployed
    # web server runs (pipeline_project.web.uvicorn_worker): uvloop, not asyncio's own.
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    TransactionTestCase._fixture_teardown = empty_written_tables
    settings.PASSWORD_HASHERS = ["tests.helpers.QuickPBKDF2PasswordHasher", *settings.PASSWORD_HASHERS]


# Every test that touches the database sees both aliases.
ALL_DATABASES = pytest.mark.django_db(databases="__all__")
ALL_DATABASES_COMMITTED = pytest.mark.django_db(databases="__all__", transaction=True)


@pytest.fixture
def api_token(db):
    return every_scope_token("test-daemon")


@pytest.fixture
def api(api_token):
    """An API client authenticated as a daemon with a bearer token."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_token}")
    return client


@pytest.fixture
def anonymous():
    return APIClient()
