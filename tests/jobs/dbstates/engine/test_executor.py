"""Prepare jobs run by a real worker against real PostgreSQL servers started by the engine."""

import time

import psycopg

from jobs.dbstates.engine import postgres, statefs
from jobs.dbstates.models import Instance, PrepareEvent, PrepareTask, State
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.helpers import wait_for
from tests.jobs.dbstates.helpers import engine_worker, prepare, prepared, script, task_events, wait_terminal

pytestmark = ALL_DATABASES_COMMITTED


def count_rows(dsn: str, table: str) -> int:
    with psycopg.connect(dsn) as conn:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def state_path(state_id: str):
    state = State.objects.get(state_id=state_id)
    return statefs.state_dir(state.engine_version, state_id)


def test_prepare_from_a_file_builds_a_state_and_starts_an_instance(tmp_path):
    job = prepared(
        script(tmp_path, "schema.sql", "CREATE TABLE t (a int); INSERT INTO t SELECT generate_series(1, 100);")
    )

    assert count_rows(job.result["dsn"], "t") == 100
    assert statefs.is_complete(state_path(job.result["state_id"]), statefs.BUILD_MARKER)
    assert Instance.objects.get(instance_id=job.result["instance_id"]).port
    types = list(PrepareEvent.objects.filter(job_id=job.job_id).values_list("type", "status", "task_id"))
    assert types[0] == ("status", "queued", "") and types[-1] == ("status", "succeeded", "")
    assert ("log", "", "execute-0") in types


def test_prepare_from_stdin():
    job = prepared(["-f", "-"], stdin="CREATE TABLE s (a int); INSERT INTO s VALUES (1), (2);")

    assert count_rows(job.result["dsn"], "s") == 2
    assert job.result["prepare_args_normalized"] == "-X -v ON_ERROR_STOP=1 -f -"


def test_an_identical_prepare_is_served_from_the_cache_without_running_a_step(tmp_path):
    path = script(tmp_path, "a.sql", "CREATE TABLE cached (a int);")
    first = prepared(path)
    copy = script(tmp_path, "copy-of-a.sql", "CREATE TABLE cached (a int);")  # same content, another path

    second = prepared(copy)

    assert second.result["state_id"] == first.result["state_id"]
    assert second.result["instance_id"] != first.result["instance_id"]
    execute = PrepareTask.objects.get(job_id=second.job_id, task_id="execute-0")
    assert execute.cached is True
    assert not PrepareEvent.objects.filter(job_id=second.job_id, type="log").exists()  # psql never ran
    assert State.objects.get(state_id=first.result["state_id"]).use_count == 2


def test_two_step_chains_share_their_first_state(tmp_path):
    base = script(tmp_path, "base.sql", "CREATE TABLE base (a int);")
    left = prepared(["-f", str(base), "-c", "CREATE TABLE left_only (a int)"])

    right = prepared(["-f", str(base), "-c", "CREATE TABLE right_only (a int)"])

    left_tasks = {t.task_id: t for t in PrepareTask.objects.filter(job_id=left.job_id)}
    right_tasks = {t.task_id: t for t in PrepareTask.objects.filter(job_id=right.job_id)}
    shared = left_tasks["execute-0"].output_state_id
    assert right_tasks["execute-0"].output_state_id == shared and right_tasks["execute-0"].cached
    assert right_tasks["execute-1"].input_id == shared and not right_tasks["execute-1"].cached
    assert State.objects.get(state_id=right.result["state_id"]).parent_id == shared
    assert count_rows(right.result["dsn"], "right_only") == 0 and count_rows(right.result["dsn"], "base") == 0


def test_plan_only_plans_and_executes_nothing(tmp_path):
    job = prepared(script(tmp_path, "p.sql", "CREATE TABLE planned (a int);"), plan_only=True)

    assert job.result is None
    types = list(PrepareTask.objects.filter(job_id=job.job_id).values_list("task_id", "type", "status"))
    assert [t[:2] for t in types] == [
        ("plan", "plan"),
        ("resolve-image", "resolve_image"),
        ("execute-0", "state_execute"),
        ("prepare-instance", "prepare_instance"),
    ]
    assert not State.objects.exists() and not Instance.objects.exists()


def test_a_failing_script_fails_the_job_and_leaves_no_state(tmp_path):
    with engine_worker():
        job = wait_terminal(prepare(script(tmp_path, "bad.sql", "CREATE TABLE ok (a int);\nSELECT nope;")).job_id)

    assert job.status == "failed" and job.error["code"] == "step_failed"
    assert not State.objects.exists() and not Instance.objects.exists()
    output = PrepareEvent.objects.filter(job_id=job.job_id, type="log").values_list("message", flat=True)
    assert any('column "nope" does not exist' in line for line in output)
    assert PrepareTask.objects.get(job_id=job.job_id, task_id="execute-0").status == "failed"
    assert not statefs.job_dir(job.job_id).joinpath("runtime").exists()
    assert ("execute-0", "failed") in task_events(job.job_id)


def test_a_dirty_cached_state_is_invalidated_and_rebuilt(tmp_path):
    path = script(tmp_path, "d.sql", "CREATE TABLE dirty (a int);")
    first = prepared(path)
    target = state_path(first.result["state_id"])
    Instance.objects.all().delete()
    (target / "postmaster.pid").write_text("999999\n")  # as if a server had died inside the state

    second = prepared(path)

    assert PrepareTask.objects.get(job_id=second.job_id, task_id="execute-0").cached is False
    assert not (target / "postmaster.pid").exists() and statefs.is_complete(target, statefs.BUILD_MARKER)
    assert count_rows(second.result["dsn"], "dirty") == 0


def test_two_concurrent_prepares_of_one_state_build_it_once(tmp_path):
    path = script(tmp_path, "slow.sql", "SELECT pg_sleep(0.5); CREATE TABLE once (a int);")
    with engine_worker(concurrency=2):
        jobs = [prepare(path), prepare(path)]
        ended = [wait_terminal(job.job_id) for job in jobs]

    assert [job.status for job in ended] == ["succeeded", "succeeded"]
    cached = sorted(PrepareTask.objects.filter(task_id="execute-0").values_list("cached", flat=True))
    assert cached == [False, True]  # the second waited for the first's build and used it
    builders = PrepareEvent.objects.filter(type="log", task_id="execute-0").values("job_id").distinct()
    assert builders.count() == 1  # psql ran once
    assert len({job.result["instance_id"] for job in ended}) == 2


def test_cancel_stops_a_running_step(tmp_path):
    from jobs.dbstates import services

    path = script(tmp_path, "long.sql", "SELECT pg_sleep(60);")
    with engine_worker():
        job = prepare(path)
        wait_for(
            lambda: PrepareTask.objects.filter(job_id=job.job_id, task_id="execute-0", status="running").exists(),
            timeout=30,
            what="the step to start",
        )
        started = time.monotonic()
        was_active = services.prepare_job_cancel(job_id=job.job_id)
        ended = wait_terminal(job.job_id, timeout=20)

    assert was_active and time.monotonic() - started < 10
    assert ended.status == "failed" and ended.error["code"] == "cancelled"
    assert not statefs.job_runtime_dir(job.job_id).exists()
    assert not State.objects.exists()


def test_a_quiet_step_sends_heartbeats(tmp_path, settings):
    settings.SQLRS_HEARTBEAT_SEC = 0.2
    job = prepared(script(tmp_path, "quiet.sql", "SELECT pg_sleep(0.7);"))

    beats = PrepareEvent.objects.filter(job_id=job.job_id, type="log", message__startswith="heartbeat:")
    assert beats.count() >= 2 and beats.first().task_id == "execute-0"


def test_servers_run_as_the_engine_user_not_root(tmp_path):
    job = prepared(script(tmp_path, "u.sql", "CREATE TABLE u (a int);"))
    instance = Instance.objects.get(instance_id=job.result["instance_id"])
    server = postgres.running(statefs.instance_dir(instance.instance_id))

    with open(f"/proc/{server.pid}/status") as status:
        uid = next(line for line in status if line.startswith("Uid:")).split()[1]
    assert uid != "0"
