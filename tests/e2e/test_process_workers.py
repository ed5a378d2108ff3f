"""Process namespaces in real runworker processes, reaching the databases directly and through
PgBouncer: a worker killed with -9 mid-task, and zombie collection by workers that do not serve
(or even know) the zombie's namespace."""

import threading

import pytest

from jobs.processes import services
from jobs.processes.models import Process, Running, Task
from jobs.processes.selectors import process_get
from jobs.processes.types import StepTimeoutError
from pipeline_project.web.notifications import blocking_hub
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.e2e.conftest import manage, stop
from tests.helpers import wait_for
from tests.jobs.processes.helpers import plant_running_task

pytestmark = [ALL_DATABASES_COMMITTED, pytest.mark.slow]

ZOMBIE_ENV = {"PROC_ZOMBIE_MARGIN_SEC": "0.5", "PROC_ZOMBIE_PERIOD_SEC": "0.2"}


def process_worker(db_env, namespace="test.quick"):
    return manage(
        "runworker",
        "--namespace",
        f"{namespace}:2",
        "--processors",
        "tests.jobs.processes.processors",
        env={**db_env, **ZOMBIE_ENV},
    )


@pytest.fixture
def db_env(route):
    """The workers' databases, reached directly or through PgBouncer."""
    yield route.env
    blocking_hub.close()


def test_kill_9_mid_task_leaves_a_zombie_that_is_collected_and_loses_nothing_else(db_env):
    import tests.jobs.processes.processors  # noqa: F401  (the test.quick namespace, for the client side)

    doomed = process_worker(db_env)
    try:
        started("victim")
        started("bystander", args={"aux_state": {"on_timeout": [{"events": ["fired"]}]}, "action": {"set_timer": 2}})
        caller = threading.Thread(target=_call_that_hangs, daemon=True)
        caller.start()
        wait_for(lambda: Running.objects.filter(process__process_id="victim").exists(), what="the call to run")
        doomed.kill()  # SIGKILL mid-task: its dl_proc_running row stays behind
        doomed.wait()
    finally:
        stop(doomed)
    call = Task.objects.get(process__process_id="victim", task_type="call")
    assert call.status == "running"

    survivor = process_worker(db_env)
    try:
        wait_for(
            lambda: Process.objects.get(process_id="victim").status == "error", timeout=15, what="zombie collection"
        )
        wait_for(
            lambda: Task.objects.filter(
                process__process_id="bystander", task_type="timeout", status="finished"
            ).exists(),
            timeout=15,
            what="the bystander's timer",
        )
    finally:
        assert stop(survivor) == 0

    victim = process_get(namespace="test.quick", process_id="victim")
    assert (victim["status"], victim["detail"], victim["corrupted_by"]) == ("error", "zombie detected", call.task_id)
    assert Task.objects.get(task_id=call.task_id).status == "error"
    assert not Running.objects.exists()
    assert [e["payload"] for e in process_get(namespace="test.quick", process_id="bystander")["history"]] == ["fired"]


def test_zombies_of_every_namespace_are_collected_by_whichever_worker_runs_the_collection(db_env):
    """Two workers, each serving one namespace, take turns at the collection; zombies of their
    namespaces, of a namespace neither serves and of one no processor is registered for are
    all collected (before, each collected only its own, so one's zombies waited while the other
    kept winning the period)."""
    workers = [process_worker(db_env, "test.quick"), process_worker(db_env, "test.ranged")]
    try:
        for worker in workers:
            wait_for_output(worker, "serving process namespaces")
        zombies = {
            namespace: plant_running_task(namespace, deadline_in_sec=-1)
            for namespace in ("test.quick", "test.ranged", "test.scripted", "nowhere.gone")
        }
        for zombie in zombies.values():
            wait_for(
                lambda zombie=zombie: Process.objects.get(pk=zombie.process_id).status == "error",
                timeout=20,
                what="zombie collection",
            )
    finally:
        assert [stop(worker) for worker in workers] == [0, 0]

    for zombie in zombies.values():
        process = Process.objects.get(pk=zombie.process_id)
        assert (process.detail, process.corrupted_by) == ("zombie detected", zombie.task_id)
    assert not Running.objects.exists()


def wait_for_output(process, text: str, timeout: float = 30) -> None:
    """Read the process's output until a line has ``text`` (a reader thread: readline blocks)."""
    seen = threading.Event()

    def read():
        for line in process.stdout:
            if text in line:
                seen.set()
                return

    threading.Thread(target=read, daemon=True).start()
    assert seen.wait(timeout), f"no {text!r} from the process within {timeout}s"


def started(process_id, **init):
    """Init a process; the worker may still be starting, longer than the namespace's 0.5 s step timeout."""
    try:
        services.process_init(namespace="test.quick", process_id=process_id, **init)
    except StepTimeoutError:
        wait_for(lambda: Process.objects.get(process_id=process_id).status == "running", what=f"{process_id} to start")


def _call_that_hangs():
    from django.db import connections

    try:
        services.process_call(namespace="test.quick", process_id="victim", args={"sleep": 30})
    except StepTimeoutError:
        pass
    finally:
        connections.close_all()
