"""The worker protocol: a claimed task's history is read when asked; successes of several
processes are recorded in one statement."""

import psycopg
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobs.processes import services
from jobs.processes.models import TASK_DONE_CHANNEL, Event, Process, Running, Schedule, Task
from jobs.processes.services.parsing import result_parse
from pipeline_project.db.connections import connection_params
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.jobs.processes.helpers import new_id

pytestmark = ALL_DATABASES_COMMITTED
NS = "test.scripted"


def imported(*, timer: bool) -> Process:
    pid = new_id()
    services.process_put(
        namespace=NS,
        process_id=pid,
        process={"aux_state": {"old": True}, "history": [{"event_id": 1, "payload": "put"}]},
        action={"set_timer": 3600} if timer else None,
    )
    return Process.objects.get(process_id=pid)


def test_successes_of_three_processes_are_one_statement_each_with_its_own_changes():
    unblocks, resets, unsets = imported(timer=True), imported(timer=True), imported(timer=False)
    old_timers = {p.id: Schedule.objects.get(process=p).task_id for p in (unblocks, resets)}
    for process in (unblocks, resets, unsets):
        services.process_task_prepare("call", namespace=NS, process_id=process.process_id)
    assert Schedule.objects.get(task_id=old_timers[unblocks.id]).status == "blocked"
    claimed = {task.process_pk: task for task in services.tasks_claim(namespace=NS, limit=3, worker="me")}
    assert set(claimed) == {unblocks.id, resets.id, unsets.id}
    results = {
        unblocks.id: {"events": ["a", "b"], "response": "one"},
        resets.id: {"events": ["c"], "aux_state": {"new": 2}, "action": {"set_timer": 7200}},
        unsets.id: {"response": {"three": [3]}, "metadata": {"m": 1}, "action": "unset_timer"},
    }

    with psycopg.connect(**connection_params(), autocommit=True) as listener:
        listener.execute(f"LISTEN {TASK_DONE_CHANNEL}")
        services.tasks_succeed(
            namespace=NS, succeeded=[(claimed[pk], result_parse(result)) for pk, result in results.items()]
        )
        notified = {n.payload for n in listener.notifies(timeout=2, stop_after=3)}

    assert notified == {
        f'{claimed[unblocks.id].task_id}\n["finished", "one", "running"]',
        f'{claimed[resets.id].task_id}\n["finished", "ok", "running"]',
        f'{claimed[unsets.id].task_id}\n["finished", {{"three": [3]}}, "running"]',
    }
    assert not Running.objects.exists()
    assert set(
        Task.objects.filter(task_id__in=[t.task_id for t in claimed.values()]).values_list("status", flat=True)
    ) == {"finished"}
    events = {
        pk: list(Event.objects.filter(process_id=pk).order_by("event_id").values_list("event_id", "payload"))
        for pk in results
    }
    assert events == {
        unblocks.id: [(1, "put"), (2, "a"), (3, "b")],
        resets.id: [(1, "put"), (2, "c")],
        unsets.id: [(1, "put")],
    }
    states = {p.id: (p.last_event_id, p.aux_state, p.metadata) for p in Process.objects.filter(id__in=results)}
    assert states == {
        unblocks.id: (3, {"old": True}, None),
        resets.id: (2, {"new": 2}, None),
        unsets.id: (1, {"old": True}, {"m": 1}),
    }
    # The call's blocked timer waits again; a new timer replaced the old one; no timer is left unset.
    assert Schedule.objects.get(process=unblocks).status == "waiting"
    assert Task.objects.get(task_id=old_timers[resets.id]).status == "cancelled"
    [new_timer] = Schedule.objects.filter(process=resets)
    assert (new_timer.task_type, new_timer.status) == ("timeout", "waiting")
    assert new_timer.task_id != old_timers[resets.id]
    assert not Schedule.objects.filter(process=unsets).exists()


def test_a_claimed_tasks_history_is_read_once_when_its_processor_first_asks():
    process = imported(timer=False)
    services.process_task_prepare("call", namespace=NS, process_id=process.process_id)
    [task] = services.tasks_claim(namespace=NS, limit=1, worker="me")

    with CaptureQueriesContext(connection) as queries:
        assert [event["payload"] for event in task.view.history] == ["put"]
        assert task.view.history is task.view.history
    assert len(queries) == 1
