"""Answers built from several reads are one snapshot: a writer that commits between two of an
answer's reads (from another thread, on its own connection) does not show in it; and a row
deleted before a deletion could lock it is a 404, not a 500."""

import json
import threading
import uuid

import pytest
from django.db import transaction

from jobs.dbstates.models import Instance, Name, PrepareJob, PrepareStatus, PrepareTask, State
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.db_helpers import raw_connection, run_in_threads
from tests.helpers import wait_for
from tests.jobs.dbstates.helpers import conforms, engine_call, error_conforms, writer_between_reads

pytestmark = ALL_DATABASES_COMMITTED
TASKS = ("plan", "resolve-image", "execute-0", "prepare-instance")


def a_job(status: str = PrepareStatus.RUNNING) -> PrepareJob:
    job = PrepareJob.objects.create(
        job_id=uuid.uuid4().hex, prepare_kind="psql", image_id="postgres:15", request={}, status=status
    )
    inputs = {"input_kind": "image", "input_id": "postgres:15@sha256:x"}
    shapes = [
        {"type": "plan", "planner_kind": "psql"},
        {"type": "resolve_image", "image_id": "postgres:15", "resolved_image_id": "postgres:15@sha256:x"},
        {"type": "state_execute", **inputs, "task_hash": "0" * 64, "output_state_id": "1" * 64, "cached": False},
        {"type": "prepare_instance", "input_kind": "state", "input_id": "1" * 64, "instance_mode": "ephemeral"},
    ]
    PrepareTask.objects.bulk_create(
        PrepareTask(job=job, position=n, task_id=task_id, status=status, **shapes[n]) for n, task_id in enumerate(TASKS)
    )
    return job


def a_state(parent: State | None = None, size: int = 1000) -> State:
    return State.objects.create(
        state_id=uuid.uuid4().hex * 2,
        parent=parent,
        image_id="postgres:15@sha256:x",
        engine_version="15",
        prepare_kind="psql",
        prepare_args_normalized="-c x",
        task_hash="0" * 64,
        size_bytes=size,
    )


def an_instance(state: State, name: str | None = None) -> Instance:
    instance = Instance.objects.create(
        instance_id=uuid.uuid4().hex, state=state, image_id=state.image_id, runtime_dir="/nonexistent/instance"
    )
    if name:
        Name.objects.create(name=name, instance=instance, state_id=state.state_id, image_id=state.image_id)
    return instance


def get(path: str, token: str, route: str, method: str = "get"):
    code, headers, body = engine_call(method, f"/sqlrs{path}", token=token)
    assert code == 200, (path, code, body[:300])
    return conforms(route, method, code, headers["Content-Type"], body)


def test_a_job_deleted_between_its_row_and_its_tasks_is_answered_whole(api_token):
    job = a_job()
    with writer_between_reads("sqlrs_prepare_jobs", lambda: PrepareJob.objects.filter(pk=job.pk).delete()) as ran:
        status = get(f"/v1/prepare-jobs/{job.job_id}", api_token, "/v1/prepare-jobs/{jobId}")
    assert ran and not PrepareJob.objects.exists()
    assert [task["task_id"] for task in status["tasks"]] == list(TASKS)


def test_a_job_and_its_tasks_are_read_as_of_one_moment_while_a_writer_flips_them(api_token):
    """A writer flips a job between queued and running and, in the same transaction, its step's
    ``cached`` with it; every answer shows the two from the same moment. The job starts queued and
    not cached, a pair the writer also writes, so a read before its first commit is not mixed."""
    job = a_job(PrepareStatus.QUEUED)
    stop = threading.Event()

    def write_or_read(index: int):
        if index == 0:
            flips = 0
            while not stop.is_set():
                running = flips % 2 == 0
                with transaction.atomic():
                    PrepareJob.objects.filter(pk=job.pk).update(status="running" if running else "queued")
                    PrepareTask.objects.filter(job=job, task_id="execute-0").update(cached=running)
                flips += 1
            return flips
        try:
            mixed = []
            for _ in range(150):
                code, _headers, body = engine_call("get", f"/sqlrs/v1/prepare-jobs/{job.job_id}", token=api_token)
                assert code == 200, body[:300]
                answer = json.loads(body)
                if (answer["status"] == "running") != answer["tasks"][2]["cached"]:
                    mixed.append(answer)
            return mixed
        finally:
            stop.set()

    flips, mixed = run_in_threads(2, write_or_read)
    assert flips > 10 and mixed == []


def test_an_instance_read_by_id_keeps_the_name_it_had(api_token):
    instance = an_instance(a_state(), name="dev")
    unbind = lambda: Name.objects.filter(name="dev").delete()  # noqa: E731
    with writer_between_reads("sqlrs_instances", unbind) as ran:
        entry = get(f"/v1/instances/{instance.instance_id}", api_token, "/v1/instances/{instanceId}")
    assert ran and entry["name"] == "dev"


def test_a_list_is_read_as_of_one_moment(api_token):
    state = a_state()
    kept, dropped = an_instance(state, name="kept").instance_id, an_instance(state, name="dropped").instance_id

    def drop():
        Name.objects.filter(instance_id=dropped).delete()
        Instance.objects.filter(pk=dropped).delete()

    with writer_between_reads("sqlrs_instances", drop) as ran:
        entries = get("/v1/instances", api_token, "/v1/instances")
    assert ran and not Instance.objects.filter(pk=dropped).exists()
    assert {(entry["instance_id"], entry["name"]) for entry in entries} == {(kept, "kept"), (dropped, "dropped")}


def test_the_cache_status_counts_the_states_it_sums(api_token):
    a_state(size=1000)
    a_state(size=2000)
    with writer_between_reads("sqlrs_states", lambda: a_state(size=5000)) as ran:
        status = get("/v1/cache/status", api_token, "/v1/cache/status")
    assert ran and State.objects.count() == 3
    assert (status["usage_bytes"], status["state_count"]) == (3000, 2)


def test_a_dry_run_tree_is_read_as_of_one_moment(api_token):
    root = a_state()
    child = a_state(parent=root)
    instance = an_instance(child)

    def remove_child():
        Instance.objects.filter(pk=instance.pk).delete()
        State.objects.filter(pk=child.pk).delete()

    path = f"/v1/states/{root.state_id}?recurse=true&dry_run=true"
    with writer_between_reads("sqlrs_states", remove_child, after=2) as ran:  # after the children's read
        tree = get(path, api_token, "/v1/states/{stateId}", method="delete")
    assert ran and not State.objects.filter(pk=child.pk).exists()
    [child_node] = tree["root"]["children"]
    assert child_node["id"] == child.state_id
    assert [node["id"] for node in child_node["children"]] == [instance.instance_id]


def test_a_job_deleted_while_it_was_being_canceled_is_a_404(api_token):
    job = a_job(PrepareStatus.QUEUED)
    gone = lambda: PrepareJob.objects.filter(pk=job.pk).delete()  # noqa: E731
    with writer_between_reads("sqlrs_prepare_jobs", gone) as ran:
        code, headers, body = engine_call("post", f"/sqlrs/v1/prepare-jobs/{job.job_id}/cancel", token=api_token)
    assert ran and code == 404, body[:300]
    error_conforms("/v1/prepare-jobs/{jobId}/cancel", "post", code, headers, body)


DELETABLE = {
    "states": ("/v1/states/{stateId}", State, a_state),
    "prepare-jobs": ("/v1/prepare-jobs/{jobId}", PrepareJob, lambda: a_job(PrepareStatus.SUCCEEDED)),
    "instances": ("/v1/instances/{instanceId}", Instance, lambda: an_instance(a_state())),
}


@pytest.mark.parametrize("kind", sorted(DELETABLE))
def test_a_row_deleted_while_its_deletion_waited_for_its_lock_is_a_404(api_token, kind):
    route, model, make = DELETABLE[kind]
    row_id = make().pk
    locked, release = threading.Event(), threading.Event()

    def act(index: int):
        if index == 0:  # another deleter: locks the row, deletes it, commits once the API waits on it
            with transaction.atomic():
                row = model.objects.select_for_update().get(pk=row_id)
                locked.set()
                release.wait(timeout=30)
                row.delete()
            return None
        locked.wait(timeout=30)
        return engine_call("delete", f"/sqlrs/v1/{kind}/{row_id}", token=api_token)

    def release_once_the_api_waits():
        wait_for(lock_waiters, timeout=30, what="the API to wait for the lock")
        release.set()

    waiter = threading.Thread(target=release_once_the_api_waits)
    waiter.start()
    _none, (code, headers, body) = run_in_threads(2, act)
    waiter.join()

    assert code == 404, body[:300]
    assert error_conforms(route, "delete", code, headers, body)["code"] == "not_found"


def lock_waiters() -> int:
    with raw_connection() as conn:
        return conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ).fetchone()[0]
