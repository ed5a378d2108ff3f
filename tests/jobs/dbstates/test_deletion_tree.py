"""Deletion trees: what is blocked and why, dry runs, force, and nothing deleted partially; a
deleted job leaves no directory, runtime or server behind, whichever path deleted it."""

import json

import psycopg
import pytest
from django.db import connection

from jobs.dbstates import services
from jobs.dbstates.engine import executor, images, postgres, statefs, steps
from jobs.dbstates.models import EngineConfig, Instance, PrepareJob, PrepareTask, State
from jobs.queue.models import Job
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.helpers import wait_for
from tests.jobs.dbstates.helpers import IMAGE, engine_call, engine_worker, prepare, prepared, wait_terminal

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
        blocked = services.instance_delete(instance_id=instance_id)
        assert blocked.outcome == "blocked"
        assert node_of(blocked, "instance") == {
            **node_of(blocked, "instance"),
            "blocked": "active_connections",
            "connections": 1,
        }
        assert Instance.objects.filter(instance_id=instance_id).exists()

        forced = services.instance_delete(instance_id=instance_id, force=True)

        assert forced.outcome == "deleted"
        with pytest.raises(psycopg.OperationalError):
            client.execute("SELECT 1")
    assert not Instance.objects.filter(instance_id=instance_id).exists()
    assert not statefs.instance_dir(instance_id).exists()


def test_a_state_with_descendants_needs_recurse_and_a_blocked_descendant_blocks_the_tree():
    parent_job = prepared(BASE)
    child_job = prepared([*BASE, "-c", "CREATE TABLE child (a int)"])
    root_id = parent_job.result["state_id"]

    alone = services.state_delete(state_id=root_id)
    assert alone.outcome == "blocked" and alone.as_dict()["root"]["blocked"] == "has_descendants"

    with psycopg.connect(child_job.result["dsn"]):
        tree = services.state_delete(state_id=root_id, recurse=True, dry_run=True)
    assert tree.outcome == "blocked" and tree.dry_run
    root = tree.as_dict()["root"]
    assert root["blocked"] == "blocked_by_descendant"
    child_state = next(child for child in root["children"] if child["kind"] == "state")
    assert child_state["blocked"] == "blocked_by_descendant"
    assert child_state["children"][0] == {**child_state["children"][0], "blocked": "active_connections"}
    assert State.objects.count() == 2 and Instance.objects.count() == 2  # nothing deleted partially

    preview = services.state_delete(state_id=root_id, recurse=True, dry_run=True)
    assert preview.outcome == "would_delete" and State.objects.count() == 2
    done = services.state_delete(state_id=root_id, recurse=True)
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
        result = services.state_delete(state_id=root_id, recurse=True, force=True)
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
        runtime = statefs.job_runtime_dir(job.job_id)
        server = wait_for(lambda: postgres.running(runtime), timeout=30, what="the step's server")
        blocked = services.prepare_job_delete(job_id=job.job_id)
        assert blocked.as_dict() == {
            "dry_run": False,
            "outcome": "blocked",
            "root": {"kind": "job", "id": job.job_id, "blocked": "active_tasks"},
        }

        forced = services.prepare_job_delete(job_id=job.job_id, force=True)

        assert forced.outcome == "deleted" and not PrepareJob.objects.filter(job_id=job.job_id).exists()
        wait_for(lambda: not statefs.job_dir(job.job_id).exists(), timeout=15, what="the job's directory to go")
        assert not postgres.is_alive(server.pid)


def runtime_left_running(job_id: str) -> postgres.Server:
    """What a worker killed in the middle of a step leaves: the job's runtime with its server up."""
    image = images.image_resolve(IMAGE)
    runtime = statefs.job_runtime_dir(job_id)
    statefs.data_dir_copy(steps.base_ensure(image), runtime)
    postgres.own(runtime)
    return postgres.start(image, runtime)


def delete_through_api(job, token, client):
    code, _headers, body = engine_call("delete", f"/sqlrs/v1/prepare-jobs/{job.job_id}?force=true", token=token)
    assert code == 200 and json.loads(body)["outcome"] == "deleted", body


def delete_in_admin(job, token, client):
    response = client.post(f"/admin/dbstates/preparejob/{job.job_id}/delete/", {"force": "on"})
    assert response.status_code == 302


def delete_by_retention(job, token, client):
    EngineConfig.objects.create(id=1, document={"orchestrator": {"jobs": {"maxIdentical": 1}}})
    prepared(BASE)  # a newer job of the same signature: the older one is past the limit


DELETIONS = {"api": delete_through_api, "admin": delete_in_admin, "retention": delete_by_retention}


@pytest.mark.parametrize("path", sorted(DELETIONS))
def test_every_deletion_of_a_finished_job_leaves_no_directory_runtime_or_server(path, api_token, admin_client):
    job = prepared(BASE)
    orphan = runtime_left_running(job.job_id)  # its worker died between its end and its clean-up

    DELETIONS[path](job, api_token, admin_client)

    assert not PrepareJob.objects.filter(job_id=job.job_id).exists()
    assert not statefs.job_dir(job.job_id).exists()
    assert not postgres.is_alive(orphan.pid)


def test_forcing_the_deletion_of_a_job_whose_worker_died_stops_its_server_and_removes_its_directory(api_token):
    job = prepare(BASE)  # queued, its last worker dead: no worker will take it again once canceled
    orphan = runtime_left_running(job.job_id)

    code, _headers, body = engine_call("delete", f"/sqlrs/v1/prepare-jobs/{job.job_id}", token=api_token)
    assert code == 409 and json.loads(body)["root"]["blocked"] == "active_tasks"
    assert statefs.job_runtime_dir(job.job_id).exists() and postgres.is_alive(orphan.pid)
    delete_through_api(job, api_token, None)

    assert not statefs.job_dir(job.job_id).exists()
    assert not postgres.is_alive(orphan.pid)
    assert Job.objects.get(job_id=job.queue_job_id).status == "canceled"


def test_the_sweep_removes_the_directories_of_jobs_whose_rows_went_without_them():
    kept, lost = prepare(BASE), prepare(BASE)
    orphan = runtime_left_running(lost.job_id)
    runtime_left_running(kept.job_id)
    with connection.cursor() as cursor:  # as a crash between the commit and the clean-up leaves it
        cursor.execute("DELETE FROM sqlrs_events WHERE job_id = %s", [lost.job_id])
        cursor.execute("DELETE FROM sqlrs_prepare_jobs WHERE job_id = %s", [lost.job_id])
    (statefs.root() / "jobs" / "not-a-job").mkdir(parents=True)

    assert executor.job_dirs_sweep()["removed"] >= 1  # with those earlier tests' truncations left

    assert not statefs.job_dir(lost.job_id).exists() and not postgres.is_alive(orphan.pid)
    assert statefs.job_runtime_dir(kept.job_id).exists() and (statefs.root() / "jobs" / "not-a-job").exists()
