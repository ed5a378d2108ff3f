import tempfile
from pathlib import Path

import pytest

from tests.jobs.dbstates.helpers import servers_stop


@pytest.fixture(scope="session")
def state_store_root():
    # Short: a server's Unix socket path (inside its data directory) must fit in 107 bytes.
    with tempfile.TemporaryDirectory(prefix="sqlrs-", dir="/tmp") as root:
        yield Path(root)


@pytest.fixture(autouse=True)
def state_store(settings, state_store_root, tmp_path):
    settings.SQLRS_STATE_STORE = state_store_root
    settings.SQLRS_SCRIPT_ROOTS = [str(tmp_path)]
    yield state_store_root
    servers_stop()
