"""A runworker process killed with -9 in the middle of a prepare: the job resumes in the next one."""

import pytest

from jobs.dbstates import postgres, statefs
from jobs.dbstates.models import PrepareTask, State
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.db_helpers import subprocess_database_env
from tests.e2e.conftest import manage, stop
from tests.helpers import wait_for
from tests.jobs.dbstates.helpers import prepare, script, servers_stop, short_state_store, wait_terminal

pytestmark = [ALL_DATABASES_COMMITTED, pytest.mark.slow]


@pytest.fixture
def engine_env(settings, tmp_path):
    with short_state_store() as root:
        settings.SQLRS_STATE_STORE = root
        settings.SQLRS_SCRIPT_ROOTS = [str(tmp_path)]
        settings.DL_DEFAULT_LEASE_TTL_SEC = 3  # the killed worker's lease runs out soon
        yield {**subprocess_database_env(), "SQLRS_STATE_STORE": str(root), "SQLRS_SCRIPT_ROOTS": str(tmp_path)}
        servers_stop()


def engine_worker_process(env):
    return manage("runworker", "--queue", "sqlrs:1", env=env)


def test_a_prepare_whose_worker_was_killed_resumes_and_succeeds(engine_env, tmp_path):
    path = script(tmp_path, "slow.sql", "SELECT pg_sleep(2); CREATE TABLE survived (a int);")
    job = prepare(path)
    doomed = engine_worker_process(engine_env)
    try:
        wait_for(
            lambda: PrepareTask.objects.filter(job_id=job.job_id, task_id="execute-0", status="running").exists(),
            timeout=60,
            what="the step to start",
        )
        runtime = statefs.job_runtime_dir(job.job_id)
        wait_for(lambda: postgres.running(runtime), timeout=10, what="the step's server")
        orphan = postgres.running(runtime)
        doomed.kill()
        doomed.wait()
    finally:
        stop(doomed)

    survivor = engine_worker_process(engine_env)
    try:
        ended = wait_terminal(job.job_id, timeout=90)
    finally:
        assert stop(survivor) == 0

    assert ended.status == "succeeded", ended.error
    assert State.objects.filter(state_id=ended.result["state_id"]).exists()
    assert not postgres.is_alive(orphan.pid)  # the dead worker's server was stopped, not left behind
    assert not statefs.job_runtime_dir(job.job_id).exists()
