"""The documented topology as real processes: workers started with --no-reaper (one of them on the
database-state engine's host, serving its queue) and one runreaper. Every app's periodic task runs
somewhere, and does its work: an ingestion run settles, a zombie is collected, a lease is reaped,
a deleted prepare job's directory is swept."""

import os
import socket
import time
import uuid
from contextlib import ExitStack
from datetime import timedelta

import pytest
from django.utils import timezone

from ingestion import services as ingestion_services
from ingestion.models import IngestionRun, Source
from jobs.dbstates.engine.identity import engine_instance_id
from jobs.dbstates.models import EngineHost
from jobs.processes.models import Process
from jobs.queue import services
from jobs.queue.models import Job, PeriodicTask, Worker
from jobs.runtime import registry
from jobs.runtime.config import WorkerConfig
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.db_helpers import subprocess_database_env
from tests.e2e.conftest import manage, runworker, stop
from tests.helpers import wait_for
from tests.jobs.dbstates.helpers import servers_stop, short_state_store
from tests.jobs.processes.helpers import plant_running_task

pytestmark = [ALL_DATABASES_COMMITTED, pytest.mark.slow]

PERIODS = {
    "INGESTION_SETTLE_PERIOD_SEC": "0.2",
    "PROC_ZOMBIE_PERIOD_SEC": "0.2",
    "PROC_ZOMBIE_MARGIN_SEC": "0.5",
    "SQLRS_RECONCILE_PERIOD_SEC": "0.3",
    "SQLRS_CACHE_EVICT_PERIOD_SEC": "0.3",
}


@pytest.fixture
def topology_env(settings):
    with short_state_store() as store:
        settings.SQLRS_STATE_STORE = store
        yield {**subprocess_database_env(), **PERIODS, "SQLRS_STATE_STORE": str(store)}
        servers_stop()


def test_workers_without_reaper_and_one_reaper_run_every_apps_periodic_tasks(topology_env, settings, tmp_path):
    run = _ingestion_run_with_a_job()
    alive = tmp_path / "reaper.alive"  # what `workerhealth --reaper` reads
    zombie = plant_running_task("nowhere.gone", deadline_in_sec=-5)
    expired = _expired_lease(queue="served.nowhere")
    orphan = settings.SQLRS_STATE_STORE / "jobs" / uuid.uuid4().hex  # a deleted prepare job's directory
    orphan.mkdir(parents=True)
    housekeeping = registry.periodic_for(WorkerConfig.from_settings({}), served={}, housekeeping=True)
    expected = {task.name for task in housekeeping}
    local = {"sqlrs.cache_evict", "sqlrs.job_dirs_sweep", "sqlrs.states_sync"}

    with ExitStack() as running:
        running.enter_context(runworker("--no-reaper", "--queue", "default:2", env=topology_env))
        engine = manage("runworker", "--no-reaper", "--queue", "sqlrs:1", env=topology_env)
        running.callback(stop, engine)
        reaper = manage("runreaper", env={**topology_env, "REAPER_ALIVE_FILE": str(alive)})
        running.callback(stop, reaper)
        wait_for(lambda: IngestionRun.objects.get(id=run.id).status == "completed", timeout=60, what="settling")
        wait_for(lambda: Process.objects.get(pk=zombie.process_id).status == "error", timeout=30, what="zombies")
        wait_for(lambda: Job.objects.get(job_id=expired).status == "queued", timeout=30, what="the reaper")
        wait_for(lambda: not orphan.exists(), timeout=30, what="the sweep of job directories")
        wait_for(
            lambda: set(PeriodicTask.objects.values_list("name", flat=True)) >= expected | local,
            timeout=30,
            what="a row for every periodic task",
        )
        assert engine.poll() is None and reaper.poll() is None
        assert time.time() - alive.stat().st_mtime < 60  # touched after each pass over its tasks
    assert (engine.returncode, reaper.returncode) == (0, 0)

    runners = dict(PeriodicTask.objects.values_list("name", "last_runner"))
    assert {"ingestion.settle", "processes.zombies", "jobs.reap", "sqlrs.jobs_reconcile"} <= expected
    assert not expected & local
    for name in expected:  # housekeeping: the reaper's alone, the workers run none of it
        assert runners[name] == f"{socket.gethostname()}:{reaper.pid}:reaper", name
    for name in local:  # the engine's: its worker's, on its host, --no-reaper or not
        assert runners[name].startswith(f"{socket.gethostname()}:{engine.pid}:"), name
    assert Process.objects.get(pk=zombie.process_id).detail == "zombie detected"


def _ingestion_run_with_a_job() -> IngestionRun:
    """A running run whose one job the default queue's worker runs: then nothing is left but settling."""
    source = Source.objects.create(name=f"roles-{uuid.uuid4().hex[:8]}", start_url="http://127.0.0.1/")
    run = ingestion_services.run_create(source_id=source.id)
    ingestion_services.run_update(run_id=run.id, status="running", active_stage="discovery")
    services.job_enqueue(
        spec=services.JobSpec(queue="default", task="test.echo", args={"run_id": str(run.id)}, lock_key=str(run.id))
    )
    return run


def _expired_lease(*, queue: str) -> uuid.UUID:
    """A job a worker that died claimed (on a queue nobody serves: the reaper's requeue is its last move)."""
    enqueued = services.job_enqueue(spec=services.JobSpec(queue=queue, task="test.echo", lock_key=uuid.uuid4().hex))
    services.jobs_claim(queue=queue, limit=1, worker_id=f"gone:{os.getpid()}")
    Job.objects.filter(job_id=enqueued.job_id).update(lease_expires_at=timezone.now() - timedelta(days=1))
    return enqueued.job_id


def test_a_worker_serving_the_engines_queue_away_from_its_host_refuses_to_start(topology_env):
    EngineHost.objects.create(engine_id="e" * 32, hostname="engine.example", state_store="/srv/state-store")

    process = manage("runworker", "--no-reaper", "--queue", "default:1", "--queue", "sqlrs:1", env=topology_env)
    output, _ = process.communicate(timeout=60)

    assert process.returncode != 0
    assert f"records engine {'e' * 32} on host 'engine.example' (state store /srv/state-store)" in output
    assert f"this worker has engine {engine_instance_id()} on host {socket.gethostname()!r}" in output
    assert not Worker.objects.exists()  # it never started
