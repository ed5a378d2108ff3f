"""The engine's identity (``/sqlrs/v1/health``) and its discovery file for a CLI (``engine.json``).

The instance id is kept in the state store, so every web process of one deployment reports
the same one, and it changes only with the store.
"""

import json
import os
import uuid
from pathlib import Path

from django.utils import timezone

from jobs.dbstates.engine import prepare_args, statefs
from pipeline_project.core.services import api_token_create

ENGINE_JSON_TOKEN_NAME = "sqlrs-cli"


def engine_instance_id() -> str:
    path = statefs.root() / "engine-id"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        candidate = path.with_name(f"engine-id.{os.getpid()}")
        candidate.write_text(uuid.uuid4().hex)
        try:
            os.link(candidate, path)  # the first process to link it wins; the others read its id
        except FileExistsError:
            pass
        finally:
            candidate.unlink()
        return path.read_text().strip()


def engine_health() -> dict:
    return {"ok": True, "version": prepare_args.ENGINE_VERSION, "instanceId": engine_instance_id(), "pid": os.getpid()}


def engine_json_write(*, path: Path, endpoint: str, pid: int) -> dict:
    """Write the discovery file (mode 0600: it holds a new API token for the CLI)."""
    _token, key = api_token_create(name=ENGINE_JSON_TOKEN_NAME)
    document = {
        "endpoint": endpoint.rstrip("/"),
        "pid": pid,
        "startedAt": timezone.now().isoformat().replace("+00:00", "Z"),
        "authToken": key,
        "version": prepare_args.ENGINE_VERSION,
        "instanceId": engine_instance_id(),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        json.dump(document, file, indent=2)
    temporary.replace(path)
    return document
