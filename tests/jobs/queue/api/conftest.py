import pytest


@pytest.fixture(autouse=True)
def loaders_run_elsewhere(settings):
    """The triggers here are seed 002's loaders' (``load.rates``): another service's workers run
    them from the shared table, as JOBS_EXTERNAL_TASKS says."""
    settings.JOBS_EXTERNAL_TASKS = ["load.*", "other"]
