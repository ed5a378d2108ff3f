"""Durable processes on a real PostgreSQL with a real runtime: progressor's own scenarios."""

import time
import uuid
from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from jobs.processes import services
from jobs.processes.models import Process, Running, Task
from jobs.processes.selectors import process_get, process_trace
from pipeline_project.api.errors import ConflictError, InvalidInputError, NotFoundError
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.helpers import wait_for
from tests.jobs.processes import processors
from tests.jobs.processes.helpers import serving, thread

pytestmark = ALL_DATABASES_COMMITTED
NS = "test.scripted"


def new_id() -> str:
    return f"p-{uuid.uuid4().hex[:12]}"


def trace(process_id, namespace=NS):
    return [(task["task_type"], task["status"]) for task in process_trace(namespace=namespace, process_id=process_id)]


def payloads(process_id, **history_range):
    got = process_get(namespace=NS, process_id=process_id, history_range=history_range or None)
    return [(event["event_id"], event["payload"]) for event in got["history"]]


def test_timers_chain_with_aux_state_metadata_and_event_ids_kept():
    pid = new_id()
    with serving():
        response = services.process_init(
            namespace=NS,
            process_id=pid,
            args={
                "events": ["a"],
                "metadata": {"owner": "t"},
                "aux_state": {"on_timeout": [{"events": ["b"], "action": {"set_timer": 0}}, {"events": ["c"]}]},
                "action": {"set_timer": 0},
            },
        )
        wait_for(lambda: trace(pid).count(("timeout", "finished")) == 2, what="two timeouts")

    assert response == "ok"
    got = process_get(namespace=NS, process_id=pid)
    assert [(e["event_id"], e["payload"]) for e in got["history"]] == [(1, "a"), (2, "b"), (3, "c")]
    assert got["last_event_id"] == 3 and got["status"] == "running"
    assert got["metadata"] == {"owner": "t"} and got["aux_state"] == {"on_timeout": []}


def test_a_call_blocks_a_pending_timer_which_fires_after_it():
    pid = new_id()
    with serving():
        services.process_init(
            namespace=NS,
            process_id=pid,
            args={"aux_state": {"on_timeout": [{"events": ["timer"]}]}, "action": {"set_timer": 0.5}},
        )
        assert services.process_call(namespace=NS, process_id=pid, args={"events": ["call"], "sleep": 0.8}) == "ok"
        # the timer fell due during the call: blocked, it fires only after the call
        wait_for(lambda: ("timeout", "finished") in trace(pid), what="the timer")

    assert trace(pid) == [("init", "finished"), ("timeout", "finished"), ("call", "finished")]
    assert payloads(pid) == [(1, "call"), (2, "timer")]  # the call ran first


def test_a_short_call_reschedules_the_blocked_timer():
    pid = new_id()
    with serving():
        services.process_init(
            namespace=NS,
            process_id=pid,
            args={"aux_state": {"on_timeout": [{"events": ["t"]}]}, "action": {"set_timer": 60}},
        )
        services.process_call(namespace=NS, process_id=pid, args={"action": {"set_timer": 0.2}})
        wait_for(lambda: ("timeout", "finished") in trace(pid), what="the rescheduled timer")

    assert trace(pid) == [
        ("init", "finished"),
        ("timeout", "cancelled"),
        ("call", "finished"),
        ("timeout", "finished"),
    ]


def test_history_ranges_forward_and_backward_with_offset_and_limit():
    pid = new_id()
    with serving():
        services.process_init(namespace=NS, process_id=pid, args={"events": [f"e{n}" for n in range(1, 11)]})

    assert [n for n, _ in payloads(pid, offset=2, limit=3)] == [3, 4, 5]
    assert [n for n, _ in payloads(pid, offset=5, limit=2, direction="backward")] == [4, 3]
    assert [n for n, _ in payloads(pid, limit=2, direction="backward")] == [10, 9]
    assert [n for n, _ in payloads(pid)] == list(range(1, 11))


def test_a_calls_timer_cancels_a_pending_remove_timer():
    pid = new_id()
    with serving():
        services.process_init(namespace=NS, process_id=pid, args={"action": {"set_timer": 60, "remove": True}})
        services.process_call(namespace=NS, process_id=pid, args={"action": {"set_timer": 0}})
        wait_for(lambda: ("timeout", "finished") in trace(pid), what="the timeout")

    assert trace(pid) == [("init", "finished"), ("remove", "cancelled"), ("call", "finished"), ("timeout", "finished")]


def test_unset_timer_cancels_the_pending_timer():
    pid = new_id()
    with serving():
        services.process_init(namespace=NS, process_id=pid, args={"action": {"set_timer": 0.3}})
        services.process_call(namespace=NS, process_id=pid, args={"action": "unset_timer"})
        time.sleep(0.6)

    assert trace(pid) == [("init", "finished"), ("timeout", "cancelled"), ("call", "finished")]


def test_a_call_waits_behind_a_long_timeout_and_runs_before_the_next_timer():
    pid = new_id()
    with serving():
        services.process_init(
            namespace=NS,
            process_id=pid,
            args={
                "aux_state": {
                    "on_timeout": [{"sleep": 0.5, "events": ["long"], "action": {"set_timer": 0}}, {"events": ["next"]}]
                },
                "action": {"set_timer": 0},
            },
        )
        wait_for(lambda: ("timeout", "running") in trace(pid), what="the long timeout to start")
        services.process_call(namespace=NS, process_id=pid, args={"events": ["call"]})
        wait_for(lambda: trace(pid).count(("timeout", "finished")) == 2, what="the next timer")

    assert [payload for _n, payload in payloads(pid)] == ["long", "call", "next"]


def test_ten_concurrent_calls_run_one_at_a_time_with_events_1_to_10():
    pid = new_id()
    responses = []
    with serving():
        services.process_init(namespace=NS, process_id=pid)

        def call(n):
            responses.append(
                services.process_call(namespace=NS, process_id=pid, args={"events": [n], "sleep": 0.02, "response": n})
            )

        for caller in [thread(call, n=n) for n in range(10)]:
            caller.join(10)

    assert sorted(responses) == list(range(10))
    assert [n for n, _payload in payloads(pid)] == list(range(1, 11))
    assert pid not in processors.overlaps


def test_a_failing_timeout_is_retried_then_corrupts_the_process_after_three_attempts():
    pid = new_id()
    with serving():
        services.process_init(
            namespace=NS,
            process_id=pid,
            # a failed attempt keeps aux_state, so every attempt takes the same raising script
            args={"aux_state": {"on_timeout": [{"raise": "down"}]}, "action": {"set_timer": 0}},
        )
        wait_for(lambda: process_get(namespace=NS, process_id=pid)["status"] == "error", timeout=10, what="the error")

    got = process_get(namespace=NS, process_id=pid)
    timeout = Task.objects.get(process__process_id=pid, task_type="timeout")
    assert got["corrupted_by"] == timeout.task_id and got["detail"] == "RuntimeError: down"
    assert (timeout.status, timeout.attempts_count) == ("error", 3)
    assert timeout.last_retry_interval == pytest.approx(0.2)  # 0.1, then × 2


def test_repair_after_a_non_retryable_timeout_error_runs_the_timeout_again():
    pid = new_id()
    with serving():
        services.process_init(
            namespace=NS,
            process_id=pid,
            args={"aux_state": {"on_timeout": [{"error": "fatal"}]}, "action": {"set_timer": 0}},
        )
        wait_for(lambda: process_get(namespace=NS, process_id=pid)["status"] == "error", what="the error")
        assert services.process_repair(
            namespace=NS, process_id=pid, args={"aux_state": {"on_timeout": [{"events": ["again"]}]}}
        ) == {"repaired": True}
        wait_for(lambda: trace(pid).count(("timeout", "finished")) == 1, what="the timeout to run again")

    assert trace(pid) == [("init", "finished"), ("timeout", "error"), ("repair", "finished"), ("timeout", "finished")]
    assert process_get(namespace=NS, process_id=pid)["status"] == "running"


def test_a_call_error_corrupts_the_process_and_a_failed_repair_keeps_its_detail():
    pid = new_id()
    with serving():
        services.process_init(namespace=NS, process_id=pid)
        with pytest.raises(services.ProcessorError, match="boom"):
            services.process_call(namespace=NS, process_id=pid, args={"error": "boom"})
        with pytest.raises(ConflictError, match="process is error"):
            services.process_call(namespace=NS, process_id=pid)
        with pytest.raises(services.ProcessorError, match="still broken"):
            services.process_repair(namespace=NS, process_id=pid, args={"error": "still broken"})
        assert process_get(namespace=NS, process_id=pid)["detail"] == "boom"
        services.process_repair(namespace=NS, process_id=pid)

    got = process_get(namespace=NS, process_id=pid)
    assert (got["status"], got["previous_status"], got["detail"], got["corrupted_by"]) == (
        "running",
        "error",
        None,
        None,
    )


def test_remove_by_timer_and_by_action():
    by_timer, by_action = new_id(), new_id()
    with serving():
        services.process_init(namespace=NS, process_id=by_timer, args={"action": {"set_timer": 0.1, "remove": True}})
        services.process_init(namespace=NS, process_id=by_action)
        assert services.process_call(namespace=NS, process_id=by_action, args={"action": "remove"}) == "ok"
        wait_for(lambda: not Process.objects.filter(process_id=by_timer).exists(), what="the remove timer")

    for pid in (by_timer, by_action):
        assert not Task.objects.filter(process__process_id=pid).exists()
        with pytest.raises(NotFoundError, match="process not found"):
            process_get(namespace=NS, process_id=pid)


def test_simple_repair_reschedules_a_corrupting_timeout_or_just_sets_running():
    timed, called = new_id(), new_id()
    with serving():
        services.process_init(
            namespace=NS,
            process_id=timed,
            args={"aux_state": {"on_timeout": [{"error": "fatal"}]}, "action": {"set_timer": 0}},
        )
        services.process_init(namespace=NS, process_id=called)
        with pytest.raises(services.ProcessorError):
            services.process_call(namespace=NS, process_id=called, args={"error": "boom"})
        wait_for(lambda: process_get(namespace=NS, process_id=timed)["status"] == "error", what="the timeout error")
        healthy = new_id()
        services.process_init(namespace=NS, process_id=healthy)
        with pytest.raises(ConflictError, match="process is running"):
            services.process_simple_repair(namespace=NS, process_id=healthy)

        Process.objects.filter(process_id=timed).update(aux_state={"on_timeout": [{"events": ["fixed"]}]})
        services.process_simple_repair(namespace=NS, process_id=timed, context={"by": "operator"})
        services.process_simple_repair(namespace=NS, process_id=called)
        wait_for(lambda: trace(timed)[-1] == ("timeout", "finished"), what="the rescheduled timeout")

    again = Task.objects.filter(process__process_id=timed, task_type="timeout").order_by("task_id").last()
    assert (again.metadata, again.context) == ({"kind": "simple_repair"}, {"by": "operator"})
    assert trace(called) == [("init", "finished"), ("call", "error")]
    got = process_get(namespace=NS, process_id=called)
    assert (got["status"], got["previous_status"], got["detail"], got["corrupted_by"]) == (
        "running",
        "error",
        None,
        None,
    )


def test_get_waits_for_a_slow_init():
    pid = new_id()
    with serving():
        starter = thread(services.process_init, namespace=NS, process_id=pid, args={"sleep": 0.5, "events": [1]})
        wait_for(lambda: Process.objects.filter(process_id=pid).exists(), what="the process row")
        got = process_get(namespace=NS, process_id=pid)
        starter.join(5)

    assert got["status"] == "running" and got["last_event_id"] == 1


def test_an_idempotent_replay_runs_nothing_new():
    pid = new_id()
    with serving():
        services.process_init(namespace=NS, process_id=pid, idempotency_key=f"{pid}-init")
        first = services.process_call(
            namespace=NS, process_id=pid, args={"events": ["x"], "response": 1}, idempotency_key=f"{pid}-c"
        )
        again = services.process_call(
            namespace=NS, process_id=pid, args={"events": ["x"], "response": 1}, idempotency_key=f"{pid}-c"
        )
        init_again = services.process_init(namespace=NS, process_id=pid, idempotency_key=f"{pid}-init")

    assert first == again == 1 and init_again == "ok"
    assert payloads(pid) == [(1, "x")]
    assert trace(pid) == [("init", "finished"), ("call", "finished")]


def test_errors_with_progressors_messages():
    pid = new_id()
    with pytest.raises(NotFoundError, match="namespace not found"):
        services.process_init(namespace="nope", process_id=pid)
    with pytest.raises(NotFoundError, match="process not found"):
        services.process_call(namespace=NS, process_id=pid)
    with serving():
        services.process_init(namespace=NS, process_id=pid)
        with pytest.raises(ConflictError, match="process already exists"):
            services.process_init(namespace=NS, process_id=pid)
        with pytest.raises(services.StepTimeoutError, match="timeout"):
            services.process_init(namespace="test.quick", process_id=pid, args={"sleep": 1.5})


def test_put_imports_a_process_with_its_history():
    pid = new_id()
    history = [{"event_id": 1, "payload": "a"}, {"event_id": 2, "payload": "b", "metadata": {"m": 1}}]
    services.process_put(
        namespace=NS, process_id=pid, process={"status": "running", "aux_state": {"x": 1}, "history": history}
    )

    got = process_get(namespace=NS, process_id=pid)
    assert (got["status"], got["aux_state"], got["last_event_id"]) == ("running", {"x": 1}, 2)
    assert [(e["event_id"], e["payload"], e["metadata"]) for e in got["history"]] == [
        (1, "a", None),
        (2, "b", {"m": 1}),
    ]
    with pytest.raises(ConflictError, match="process already exists"):
        services.process_put(namespace=NS, process_id=pid, process={})


def test_put_with_a_timer_and_with_a_remove_timer():
    timed, doomed = new_id(), new_id()
    with serving():
        services.process_put(
            namespace=NS,
            process_id=timed,
            process={"aux_state": {"on_timeout": [{"events": ["fired"]}]}},
            action={"set_timer": 0.1},
        )
        services.process_put(namespace=NS, process_id=doomed, process={}, action={"set_timer": 0.1, "remove": True})
        wait_for(lambda: ("timeout", "finished") in trace(timed), what="the timer")
        wait_for(lambda: not Process.objects.filter(process_id=doomed).exists(), what="the remove timer")

    assert payloads(timed) == [(1, "fired")]


@pytest.mark.parametrize(
    ("process", "action"),
    [
        ({"history": [{"event_id": 1}, {"event_id": 1}]}, None),
        ({"history": [{"event_id": 1, "timestamp": 1e300}]}, None),
        ({"history": [{"event_id": 1, "timestamp": "yesterday"}]}, None),
        ({"process_id": "someone-else"}, None),
        ({"detail": "a\x00b"}, None),
        ({}, {"set_timer": 1e300}),
        ({}, {"set_timer": "2026-02-30T00:00:00+00:00"}),
        ({}, {"set_timer": "tomorrow"}),
    ],
)
def test_put_refuses_imports_that_break_its_rules(process, action):
    with pytest.raises(InvalidInputError):
        services.process_put(namespace=NS, process_id=new_id(), process=process, action=action)
    assert not Process.objects.exists()


def test_put_takes_progressors_export_shape():
    pid = new_id()
    exported_at = 1_790_000_000  # Unix seconds, as progressor writes event timestamps
    services.process_put(
        namespace=NS,
        process_id=pid,
        process={"process_id": pid, "status": "running", "history": [{"event_id": 1, "timestamp": exported_at}]},
    )

    [event] = process_get(namespace=NS, process_id=pid)["history"]
    assert datetime.fromisoformat(event["timestamp"]).timestamp() == exported_at
    with pytest.raises(InvalidInputError, match="differs"):
        services.process_put(namespace=NS, process_id=new_id(), process={"process_id": "someone-else"})


def test_put_of_a_process_with_a_running_task_from_the_past_is_collected_as_a_zombie(settings):
    settings.PROC_ZOMBIE_PERIOD_SEC = 0.1
    settings.PROC_ZOMBIE_MARGIN_SEC = 0.0
    pid = new_id()
    services.process_put(namespace="test.quick", process_id=pid, process={"history": [{"event_id": 1}]})
    process = Process.objects.get(process_id=pid)
    long_ago = timezone.now() - timedelta(seconds=30)
    stuck = Task.objects.create(
        process=process, task_type="timeout", status="running", scheduled_time=long_ago, running_time=long_ago
    )
    Running.objects.create(
        process=process,
        task=stuck,
        namespace="test.quick",
        task_type="timeout",
        running_time=long_ago,
        deadline=long_ago,
        worker="gone",
    )

    with serving(namespaces={"test.quick": 1}):
        wait_for(lambda: Process.objects.get(process_id=pid).status == "error", what="zombie collection")

    got = process_get(namespace="test.quick", process_id=pid)
    assert (got["detail"], got["corrupted_by"]) == ("zombie detected", stuck.task_id)
    assert not Running.objects.filter(process=process).exists()


def test_a_timer_out_of_range_is_an_unsupported_result_not_a_crash():
    pid = new_id()
    with serving():
        services.process_init(namespace=NS, process_id=pid)
        with pytest.raises(services.ProcessorError, match="unsupported_result"):
            services.process_call(namespace=NS, process_id=pid, args={"action": {"set_timer": 1e300}})
