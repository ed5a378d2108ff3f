"""The engine's identity and its discovery file."""

import json
import os
import stat

import pytest
from django.core.management import call_command

from jobs.dbstates.engine import identity
from pipeline_project.core import selectors as core_selectors

pytestmark = pytest.mark.django_db


def test_health_needs_no_token_and_names_a_stable_engine(anonymous):
    first = anonymous.get("/sqlrs/v1/health")
    second = anonymous.get("/sqlrs/v1/health")

    assert first.status_code == 200
    assert first.json() == {**first.json(), "ok": True, "pid": os.getpid()}
    assert first.json()["instanceId"] == second.json()["instanceId"] == identity.engine_instance_id()
    assert anonymous.post("/sqlrs/v1/health").status_code == 405


def test_engine_json_holds_a_working_token_and_is_private(tmp_path):
    path = tmp_path / "engine.json"

    call_command("writeenginejson", str(path), "--endpoint", "http://127.0.0.1:9000/sqlrs/", "--pid", "4242")

    document = json.loads(path.read_text())
    assert set(document) == {"endpoint", "pid", "startedAt", "authToken", "version", "instanceId"}
    assert document["endpoint"] == "http://127.0.0.1:9000/sqlrs" and document["pid"] == 4242
    assert document["instanceId"] == identity.engine_instance_id()
    assert core_selectors.api_token_by_key(key=document["authToken"]).name == "sqlrs-cli"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
