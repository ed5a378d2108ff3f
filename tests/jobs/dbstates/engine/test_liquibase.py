"""Liquibase prepares, with a stand-in Liquibase: one state per changeset, planned with
update-sql and applied with update-count --count=1; arguments filtered and paths mapped."""

import time

import psycopg
import pytest

from jobs.dbstates import services
from jobs.dbstates.engine import liquibase, postgres, statefs
from jobs.dbstates.engine.steps import PrepareRequest
from jobs.dbstates.models import PrepareTask, State
from pipeline_project.api.errors import InvalidInputError
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.helpers import wait_for
from tests.jobs.dbstates.helpers import engine_worker, fake_liquibase, script, wait_terminal

pytestmark = ALL_DATABASES_COMMITTED

TWO = """--liquibase formatted sql
--changeset ann:1
CREATE TABLE people (id int);
--changeset bob:2
INSERT INTO people VALUES (1), (2);
"""
THIRD = "--changeset ann:3\nALTER TABLE people ADD COLUMN name text;\n"


@pytest.fixture(autouse=True)
def liquibase_exec(settings, tmp_path):
    settings.SQLRS_LIQUIBASE_EXEC = fake_liquibase(tmp_path)
    return settings.SQLRS_LIQUIBASE_EXEC


def prepare_lb(args, **extra):
    request = PrepareRequest(prepare_kind="lb", image_id="postgres:15", liquibase_args=args, **extra)
    job = services.prepare_job_submit(request=request)
    with engine_worker():
        return wait_terminal(job.job_id)


def test_each_changeset_becomes_a_state_and_a_longer_changelog_reuses_them(tmp_path):
    changelog = script(tmp_path, "changelog.sql", TWO)
    first = prepare_lb([f"--changelog-file={changelog}", "update"])
    assert first.status == "succeeded", first.error
    with psycopg.connect(first.result["dsn"]) as conn:
        assert conn.execute("SELECT count(*) FROM people").fetchone() == (2,)
    tasks = PrepareTask.objects.filter(job_id=first.job_id, type="state_execute").order_by("position")
    assert [(t.changeset_id, t.changeset_author, t.cached) for t in tasks] == [("1", "ann", False), ("2", "bob", False)]
    assert first.prepare_args_normalized == f"--changelog-file={changelog} update"

    changelog.write_text(TWO + THIRD)
    second = prepare_lb(["--changelog-file", "changelog.sql", "update"], work_dir=str(tmp_path))

    assert second.status == "succeeded", second.error
    tasks = PrepareTask.objects.filter(job_id=second.job_id, type="state_execute").order_by("position")
    assert [t.cached for t in tasks] == [True, True, False]  # the plan's run ids do not change the hashes
    assert State.objects.get(state_id=second.result["state_id"]).parent_id == first.result["state_id"]
    with psycopg.connect(second.result["dsn"]) as conn:
        assert conn.execute("SELECT count(*) FROM people WHERE name IS NULL").fetchone() == (2,)


def test_a_failing_changeset_fails_the_job(tmp_path):
    changelog = script(tmp_path, "bad.sql", TWO + "--changeset ann:3\nSELECT broken;\n")

    job = prepare_lb([f"--changelog-file={changelog}", "update"])

    assert job.status == "failed" and job.error["code"] == "step_failed"
    assert State.objects.count() == 2  # the two good changesets are cached


@pytest.mark.parametrize(
    ("request_fields", "message"),
    [
        ({"liquibase_args": ["--url=jdbc:postgresql://db/x", "update"]}, "connects Liquibase itself"),
        ({"liquibase_args": ["--changelog-file=rel.xml", "update"]}, "relative"),
        ({"liquibase_args": ["--changelog-file=/etc/passwd", "update"]}, "outside"),
        ({"liquibase_args": ["drop-all"]}, "one command"),
        ({"liquibase_args": ["update"]}, "--changelog-file"),
        ({"liquibase_args": ["update"], "liquibase_exec": "/bin/sh"}, "another program"),
        ({"liquibase_args": ["update"], "liquibase_env": {"LIQUIBASE_COMMAND_URL": "x"}}, "connection"),
        ({"liquibase_args": ["update"], "liquibase_env": {"JAVA_TOOL_OPTIONS": "-javaagent:x"}}, "LIQUIBASE_"),
        ({"liquibase_args": ["update"], "liquibase_exec_mode": "windows-bat"}, "auto or native"),
    ],
)
def test_arguments_are_filtered(request_fields, message):
    with pytest.raises(InvalidInputError, match=message):
        liquibase.liquibase_request_normalize(**request_fields)


def test_without_an_executable_lb_is_refused_with_how_to_configure_it(settings):
    settings.SQLRS_LIQUIBASE_EXEC = ""
    with pytest.raises(InvalidInputError, match="SQLRS_LIQUIBASE_EXEC"):
        services.prepare_job_submit(
            request=PrepareRequest(prepare_kind="lb", image_id="postgres:15", liquibase_args=["update"])
        )


def stand_in(directory, body: str) -> str:
    """A Liquibase that runs ``body`` (sh) whatever it is asked."""
    program = directory / "stand-in-liquibase"
    program.write_text(f"#!/bin/sh\n{body}\n")
    program.chmod(0o755)
    return str(program)


def test_cancel_kills_liquibase_while_it_plans(tmp_path, settings):
    pid_file = tmp_path / "liquibase.pid"
    settings.SQLRS_LIQUIBASE_EXEC = stand_in(tmp_path, f"echo $$ > {pid_file}; exec sleep 60")
    changelog = script(tmp_path, "changelog.sql", TWO)
    args = [f"--changelog-file={changelog}", "update"]
    job = services.prepare_job_submit(
        request=PrepareRequest(prepare_kind="lb", image_id="postgres:15", liquibase_args=args)
    )

    with engine_worker():
        wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), timeout=60, what="Liquibase to plan")
        planner = int(pid_file.read_text())
        started = time.monotonic()
        services.prepare_job_cancel(job_id=job.job_id)
        ended = wait_terminal(job.job_id, timeout=20)

    assert ended.status == "failed" and ended.error["code"] == "cancelled"
    assert time.monotonic() - started < 10
    assert not postgres.is_alive(planner)  # killed with its run, not left to its 60 s
    assert not (statefs.job_dir(job.job_id) / "plan").exists()  # nor the server it planned against


def test_a_plan_failure_is_stored_as_every_failure_is_masked_and_storable(tmp_path, settings):
    settings.SQLRS_LIQUIBASE_EXEC = stand_in(
        tmp_path, r"printf 'cannot reach postgres://app:hunter2@db/x, api_key=abc123 \000 \377 end\n' >&2; exit 3"
    )
    changelog = script(tmp_path, "changelog.sql", TWO)

    job = prepare_lb([f"--changelog-file={changelog}", "update"])

    assert job.status == "failed" and job.error["code"] == "plan_failed", job.error
    assert job.error["message"] == "Liquibase update-sql exited with code 3"
    assert "hunter2" not in job.error["details"] and "abc123" not in job.error["details"]
    assert "postgres://app:***@db/x, api_key=*** \ufffd \ufffd end" in job.error["details"]
