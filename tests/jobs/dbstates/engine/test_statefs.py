"""The state store's markers: valid in the boot they were written in until the file system is
synced, for good after; a state whose marker did not survive a restart is dirty."""

import json

import pytest

from jobs.dbstates.engine import statefs


@pytest.fixture
def state(settings, tmp_path):
    settings.SQLRS_STATE_STORE = tmp_path / "store"  # a store of the test's own
    directory = statefs.state_dir("15.0", "a" * 64)
    directory.mkdir(parents=True)
    (directory / "PG_VERSION").write_text("15\n")
    return directory


def restarted(monkeypatch):
    statefs.boot_id.cache_clear()
    monkeypatch.setattr(statefs, "boot_id", lambda: "another-boot")


def test_a_marker_is_valid_in_its_boot_and_not_after_a_restart_unless_synced(state, monkeypatch):
    statefs.write_marker(state, statefs.BUILD_MARKER)
    assert statefs.is_complete(state, statefs.BUILD_MARKER)
    assert json.loads((state / statefs.BUILD_MARKER).read_text())["durable"] is False

    restarted(monkeypatch)

    assert not statefs.is_complete(state, statefs.BUILD_MARKER)


def test_a_synced_marker_survives_a_restart(state, monkeypatch):
    statefs.write_marker(state, statefs.BUILD_MARKER)

    assert statefs.markers_make_durable() == 1
    assert statefs.markers_make_durable() == 0
    restarted(monkeypatch)

    assert statefs.is_complete(state, statefs.BUILD_MARKER)


@pytest.mark.parametrize("content", ["", "not json", "[]", '{"boot": ""}'])
def test_an_unreadable_marker_is_not_valid(state, content):
    (state / statefs.BUILD_MARKER).write_text(content)
    assert not statefs.is_complete(state, statefs.BUILD_MARKER)


def test_a_pid_file_makes_a_state_dirty(state):
    statefs.write_marker(state, statefs.BUILD_MARKER)
    (state / "postmaster.pid").write_text("1\n")
    assert statefs.is_dirty(state) and not statefs.is_complete(state, statefs.BUILD_MARKER)
