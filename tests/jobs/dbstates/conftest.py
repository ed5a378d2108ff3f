import pytest

from tests.jobs.dbstates.helpers import servers_stop, short_state_store


@pytest.fixture(scope="session")
def state_store_root():
    with short_state_store() as root:
        yield root


@pytest.fixture(autouse=True)
def state_store(settings, state_store_root, tmp_path):
    settings.SQLRS_STATE_STORE = state_store_root
    settings.SQLRS_SCRIPT_ROOTS = [str(tmp_path)]
    yield state_store_root
    servers_stop()
