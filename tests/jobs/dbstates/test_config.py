"""The engine's config: set, read (raw and effective), remove, and validation."""

import pytest

from jobs.dbstates import config
from pipeline_project.api.errors import InvalidInputError, NotFoundError

pytestmark = pytest.mark.django_db


def test_set_read_and_remove_round_trip():
    assert config.config_get() == {}
    assert config.config_get(path="orchestrator.jobs.maxIdentical", effective=True) == 2

    assert config.config_set(path="orchestrator.jobs.maxIdentical", value=7) == {
        "path": "orchestrator.jobs.maxIdentical",
        "value": 7,
    }
    config.config_set(path="cache.capacity.maxBytes", value=10_000_000)

    assert config.config_get() == {
        "orchestrator": {"jobs": {"maxIdentical": 7}},
        "cache": {"capacity": {"maxBytes": 10_000_000}},
    }
    effective = config.config_get(effective=True)
    assert effective["cache"]["capacity"] == {**config.DEFAULTS["cache"]["capacity"], "maxBytes": 10_000_000}
    assert config.config_value("orchestrator.jobs.maxIdentical") == 7

    assert config.config_remove(path="orchestrator.jobs.maxIdentical", effective=True)["value"] == 2
    with pytest.raises(NotFoundError):
        config.config_get(path="orchestrator.jobs.maxIdentical")
    with pytest.raises(NotFoundError):
        config.config_remove(path="orchestrator.jobs.maxIdentical")


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("orchestrator.jobs.maxIdentical", -1, "minimum"),
        ("orchestrator.jobs.maxIdentical", "2", "integer"),
        ("cache.capacity.minStateAge", "10 minutes", "match"),
        ("cache.capacity.lowWatermark", 0.95, "lowWatermark must not exceed highWatermark"),
        ("nothing.here", 1, "Additional properties"),
        ("orchestrator..jobs", 1, "path"),
        ("orchestrator.jobs.maxIdentical", float("nan"), "value"),
    ],
)
def test_invalid_values_are_refused_and_nothing_is_stored(path, value, message):
    with pytest.raises(InvalidInputError, match=message):
        config.config_set(path=path, value=value)
    assert config.config_get() == {}
