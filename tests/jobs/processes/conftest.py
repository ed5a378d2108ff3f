import pytest

from pipeline_project.web.notifications import blocking_hub


@pytest.fixture(autouse=True)
def close_blocking_hub():
    """The hub's LISTEN connections would keep the test database from being dropped."""
    yield
    blocking_hub.close()
