"""Zombie collection: every namespace's tasks past their deadline, whichever worker collects,
whether or not the namespace's processor is registered where it runs."""

from jobs.processes import namespaces, services
from jobs.processes.models import Process, Running, Task
from jobs.processes.worker.housekeeping import collect_zombies
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.jobs.processes.helpers import plant_running_task

pytestmark = ALL_DATABASES_COMMITTED
UNREGISTERED = "nowhere.gone"


def test_every_namespaces_zombies_are_collected_registered_or_not(settings):
    settings.PROC_ZOMBIE_MARGIN_SEC = 0.0
    assert namespaces.get(UNREGISTERED) is None
    zombies = [plant_running_task(namespace, deadline_in_sec=-1) for namespace in (UNREGISTERED, "test.scripted")]

    assert collect_zombies() == {"collected": 2}

    for zombie in zombies:
        process = Process.objects.get(pk=zombie.process_id)
        assert (process.status, process.previous_status) == ("error", "running")
        assert (process.detail, process.corrupted_by) == ("zombie detected", zombie.task_id)
        assert Task.objects.get(task_id=zombie.task_id).status == "error"
    assert not Running.objects.exists()


def test_a_task_within_its_deadline_or_the_margin_after_it_is_left_running(settings):
    settings.PROC_ZOMBIE_MARGIN_SEC = 30.0
    in_time = plant_running_task(UNREGISTERED, deadline_in_sec=5)
    within_margin = plant_running_task(UNREGISTERED, deadline_in_sec=-10)
    overdue = plant_running_task(UNREGISTERED, deadline_in_sec=-31)

    assert collect_zombies() == {"collected": 1}

    assert set(Running.objects.values_list("task_id", flat=True)) == {in_time.task_id, within_margin.task_id}
    assert Process.objects.get(pk=overdue.process_id).status == "error"


def test_the_claim_writes_the_deadline_of_the_namespaces_step_timeout():
    services.process_init_prepare(namespace="test.quick", process_id="claimed")
    [claimed] = services.tasks_claim(namespace="test.quick", limit=1, worker="me")
    running = Running.objects.get(task_id=claimed.task_id)

    step = namespaces.require("test.quick").process_step_timeout
    assert (running.deadline - running.running_time).total_seconds() == step
