"""Deletion trees: what is blocked and why, dry runs, force, and nothing deleted partially."""

import psycopg
import pytest

from jobs.dbstates import deletion, services, statefs
from jobs.dbstates.models import Instance, PrepareJob, PrepareTask, State
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.helpers import wait_for
from tests.jobs.dbstates.helpers import engine_worker, prepare, prepared, wait_terminal

pytestmark = ALL_DATABASES_COMMITTED
BASE = ["-c", "CREATE TABLE base (a int)"]


def node_of(result, kind: str) -> dict:
    def walk(node):
        yield node
        for child in node.get("children", []):
            yield from walk(child)

    return next(node for node in walk(result.as_dict()["root"]) if node["kind"] == kind)


def test_an_instance_with_a_client_connected_is_blocked_unless_forced():
    job = prepared(BASE)
    instance_id = job.result["instance_id"]
    with psycopg.connect(job.result["dsn"], autocommit=True) as client:
        blocked = deletion.instance_delete(instance_id=instance_id)
        assert blocked.outcome == "blocked"
        assert node_of(blocked, "instance") == {
            **node_of(blocked, "instance"),
            "blocked": "active_connections",
            "connections": 1,
        }
        assert Instance.objects.filter(instance_id=instance_id).exists()

        forced = deletion.instance_delete(instance_id=instance_id, force=True)

        assert forced.outcome == "deleted"
        with pytest.raises(psycopg.OperationalError):
            client.execute("SELECT 1")
    assert not Instance.objects.filter(instance_id=instance_id).exists()
    assert not statefs.instance_dir(instance_id).exists()


def test_a_state_with_descendants_needs_recurse_and_a_blocked_descendant_blocks_the_tree():
    parent_job = prepared(BASE)
    child_job = prepared([*BASE, "-c", "CREATE TABLE child (a int)"])
    root_id = parent_job.result["state_id"]

    alone = deletion.state_delete(state_id=root_id)
    assert alone.outcome == "blocked" and alone.as_dict()["root"]["blocked"] == "has_descendants"

    with psycopg.connect(child_job.result["dsn"]):
        tree = deletion.state_delete(state_id=root_id, recurse=True, dry_run=True)
    assert tree.outcome == "blocked" and tree.dry_run
    root = tree.as_dict()["root"]
    assert root["blocked"] == "blocked_by_descendant"
    child_state = next(child for child in root["children"] if child["kind"] == "state")
    assert child_state["blocked"] == "blocked_by_descendant"
    assert child_state["children"][0] == {**child_state["children"][0], "blocked": "active_connections"}
    assert State.objects.count() == 2 and Instance.objects.count() == 2  # nothing deleted partially

    preview = deletion.state_delete(state_id=root_id, recurse=True, dry_run=True)
    assert preview.outcome == "would_delete" and State.objects.count() == 2
    done = deletion.state_delete(state_id=root_id, recurse=True)
    assert done.outcome == "deleted"
    assert not State.objects.exists() and not Instance.objects.exists()
    assert not any(statefs.root().glob(f"engines/postgres/*/states/{root_id}"))


def test_a_state_a_running_task_reads_is_blocked_by_active_tasks():
    root_id = prepared(BASE).result["state_id"]
    with engine_worker():
        job = prepare([*BASE, "-c", "SELECT pg_sleep(30)"])
        wait_for(
            lambda: PrepareTask.objects.filter(job_id=job.job_id, task_id="execute-1", status="running").exists(),
            timeout=30,
            what="the second step to run",
        )
        result = deletion.state_delete(state_id=root_id, recurse=True, force=True)
        services.prepare_job_cancel(job_id=job.job_id)
        wait_terminal(job.job_id)

    assert result.outcome == "blocked" and result.as_dict()["root"]["blocked"] == "active_tasks"


def test_a_running_job_is_blocked_unless_forced_which_cancels_it():
    with engine_worker():
        job = prepare(["-c", "SELECT pg_sleep(30)"])
        wait_for(
            lambda: PrepareTask.objects.filter(job_id=job.job_id, task_id="execute-0", status="running").exists(),
            timeout=30,
            what="the step to run",
        )
        blocked = deletion.prepare_job_delete(job_id=job.job_id)
        assert blocked.as_dict() == {
            "dry_run": False,
            "outcome": "blocked",
            "root": {"kind": "job", "id": job.job_id, "blocked": "active_tasks"},
        }

        forced = deletion.prepare_job_delete(job_id=job.job_id, force=True)

        assert forced.outcome == "deleted" and not PrepareJob.objects.filter(job_id=job.job_id).exists()
        wait_for(lambda: not statefs.job_dir(job.job_id).exists(), timeout=15, what="the job's directory to go")
