"""The engine is local to one host: a worker serving its queue with another store, or on another
host, refuses to start, naming both; adopting moves the engine when it really moved."""

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from jobs.dbstates.engine import placement
from jobs.dbstates.engine.identity import engine_instance_id
from jobs.dbstates.models import EngineHost, State
from jobs.queue.handlers import registry
from jobs.runtime.build import build_worker
from jobs.runtime.config import WorkerConfig
from jobs.runtime.registry import StartRefused
from tests.conftest import ALL_DATABASES
from tests.jobs.dbstates.helpers import short_state_store
from tests.jobs.helpers import FAST

pytestmark = ALL_DATABASES


def engine_worker(queues=None):
    return build_worker(WorkerConfig.from_settings({"queue": queues or {"sqlrs": 1}}, **FAST), registry)


@pytest.fixture
def renamed_host(monkeypatch):
    monkeypatch.setattr(placement.socket, "gethostname", lambda: "elsewhere.example")


def test_the_first_worker_serving_the_engine_records_where_it_lives(state_store):
    engine_worker()

    recorded = EngineHost.objects.get()
    assert recorded.engine_id == engine_instance_id() == (state_store / "engine-id").read_text().strip()
    assert (recorded.hostname, recorded.state_store) == (placement.here().hostname, str(state_store.resolve()))
    engine_worker()  # the engine's own host and store: it starts again


def test_a_worker_with_another_state_store_refuses_naming_both(state_store, settings):
    engine_worker()
    engine_id = engine_instance_id()

    with short_state_store() as other:
        settings.SQLRS_STATE_STORE = other
        with pytest.raises(StartRefused) as refused:
            engine_worker({"default": 1, "sqlrs": 1})
        message = str(refused.value)
        assert f"engine {engine_id}" in message and str(state_store.resolve()) in message  # the engine's
        assert f"engine {engine_instance_id()}" in message and str(other) in message  # this worker's
        assert "Serve 'sqlrs' only on the engine's host" in message
        assert engine_worker({"default": 1}).sources  # what is not the engine's still runs here


def test_a_worker_on_another_host_refuses_naming_both(state_store, renamed_host):
    EngineHost.objects.create(engine_id=engine_instance_id(), hostname="engine.example", state_store="/srv/store")

    both = r"records engine \w+ on host 'engine.example' .* on host 'elsewhere.example'"
    with pytest.raises(StartRefused, match=both):
        engine_worker()


def test_adopting_records_this_host_when_the_engine_moved_with_its_store(state_store, renamed_host):
    EngineHost.objects.create(engine_id=engine_instance_id(), hostname="old-name", state_store="/old/path")
    out = io.StringIO()

    call_command("sqlrsengine", "adopt", stdout=out)

    assert "on host 'elsewhere.example'" in out.getvalue() and "on host 'old-name'" in out.getvalue()
    assert EngineHost.objects.get().hostname == "elsewhere.example"
    engine_worker()


def test_adopting_another_store_is_refused_while_the_database_holds_its_states(state_store):
    EngineHost.objects.create(engine_id="0" * 32, hostname="engine.example", state_store="/srv/store")
    State.objects.create(state_id="s" * 64, image_id="postgres:15", engine_version="15", prepare_kind="psql")

    with pytest.raises(CommandError, match="whose states and instances are in that store"):
        call_command("sqlrsengine", "adopt", stdout=io.StringIO())
    assert EngineHost.objects.get().engine_id == "0" * 32
