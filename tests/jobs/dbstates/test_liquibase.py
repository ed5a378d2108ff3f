"""Liquibase prepares, with a stand-in Liquibase: one state per changeset, planned with
update-sql and applied with update-count --count=1; arguments filtered and paths mapped."""

import psycopg
import pytest

from jobs.dbstates import liquibase, services
from jobs.dbstates.models import PrepareTask, State
from jobs.dbstates.steps import PrepareRequest
from pipeline_project.core.errors import InvalidInputError
from tests.conftest import ALL_DATABASES_COMMITTED
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
