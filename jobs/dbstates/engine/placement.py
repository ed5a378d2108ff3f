"""Where the engine lives. Its state store and the servers it starts (on loopback) are local to one
host, so prepare jobs must run there, and nowhere else.

The engine's identity is recorded twice: in its state store (the ``engine-id`` file) and in the
database (``sqlrs_engine_host``: that id, the host and the store's path), the latter by the first
worker that serves the engine's queue. Every worker that serves it checks, before it starts, that
its store and its host are the recorded ones, and refuses with a message naming both otherwise.
"""

import socket
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction

from jobs.dbstates.engine import statefs
from jobs.dbstates.engine.identity import engine_instance_id
from jobs.dbstates.models import EngineHost, Instance, State
from jobs.runtime.registry import Served, StartRefused


@dataclass(frozen=True)
class Place:
    engine_id: str
    hostname: str
    state_store: str

    def __str__(self) -> str:
        return f"engine {self.engine_id} on host {self.hostname!r} (state store {self.state_store})"


def here() -> Place:
    """This process's store (its engine id, made if the store is new) and host."""
    return Place(engine_instance_id(), socket.gethostname(), str(statefs.root().resolve()))


def engine_place() -> Place | None:
    """Where the database says the engine lives (None: no worker has served it yet)."""
    row = EngineHost.objects.filter(id=1).first()
    return None if row is None else Place(row.engine_id, row.hostname, row.state_store)


def engine_place_claim() -> tuple[Place, Place]:
    """``(the engine's place, this one)``, recording this one as the engine's if none is yet."""
    this = here()
    row, _created = EngineHost.objects.get_or_create(
        id=1, defaults={"engine_id": this.engine_id, "hostname": this.hostname, "state_store": this.state_store}
    )
    return Place(row.engine_id, row.hostname, row.state_store), this


def serving_check(served: Served) -> None:
    """A worker's start check: one that serves the engine's queue must be on the engine's host, with its store."""
    queue = settings.SQLRS_QUEUE
    if queue not in served.get("queue", {}):
        return
    engine, this = engine_place_claim()
    if (engine.engine_id, engine.hostname) != (this.engine_id, this.hostname):
        raise StartRefused(
            f"this worker serves the {queue!r} queue, but the database-state engine lives elsewhere: the "
            f"database records {engine}; this worker has {this}. Serve {queue!r} only on the engine's host, "
            "with its state store (docker-compose: the `engine` service); if the engine moved here with its "
            "store, run `manage.py sqlrsengine adopt` here first."
        )


@transaction.atomic
def engine_adopt() -> tuple[Place | None, Place]:
    """Record this host and store as the engine's (it moved here, or its host was renamed).
    Refused (ValueError) when the recorded engine's store is another one and the database still
    holds states or instances: they live in that store, which this host cannot reach."""
    EngineHost.objects.select_for_update().filter(id=1).first()
    engine, this = engine_place(), here()
    holds_states = State.objects.exists() or Instance.objects.exists()
    if engine is not None and engine.engine_id != this.engine_id and holds_states:
        raise ValueError(
            f"the database records {engine}, whose states and instances are in that store; this host has "
            f"{this}. Move that store here (SQLRS_STATE_STORE) instead, or delete its states first."
        )
    EngineHost.objects.update_or_create(
        id=1, defaults={"engine_id": this.engine_id, "hostname": this.hostname, "state_store": this.state_store}
    )
    return engine, this
