import pytest

from tests.e2e.servers import web_server


@pytest.fixture(scope="session")
def service_url(django_db_setup):
    """The web server as deployed, on the test databases, for every test of the client. Its event
    streams close after a second (clients resume them), so that following exercises resuming."""
    with web_server(env={"DL_EVENTS_MAX_FOLLOW_SEC": "1", "LOG_LEVEL": "ERROR"}) as (port, _server):
        yield f"http://127.0.0.1:{port}"
