"""A client's init, call and repair carry a history range and a context to the processor;
simple repair's context reaches the processor of the timer it runs again."""

import pytest

from jobs.processes import services
from jobs.processes.models import MAX_EVENT_ID, Process, Task
from jobs.processes.selectors import process_get
from pipeline_project.api.errors import InvalidInputError
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.helpers import wait_for
from tests.jobs.processes.helpers import new_id, serving

pytestmark = ALL_DATABASES_COMMITTED
NS = "test.scripted"
TEN_EVENTS = {"events": [f"e{n}" for n in range(1, 11)]}


def started(namespace=NS, **init) -> str:
    pid = new_id()
    services.process_init(namespace=namespace, process_id=pid, args=TEN_EVENTS, **init)
    return pid


def seen_by_call(pid, namespace=NS, **request) -> dict:
    return services.process_call(namespace=namespace, process_id=pid, args={"observe": True}, **request)


@pytest.mark.parametrize(
    ("history_range", "event_ids"),
    [
        ({"offset": 2, "limit": 3}, [3, 4, 5]),
        ({"offset": 7}, [8, 9, 10]),
        ({"limit": 4}, [1, 2, 3, 4]),
        ({"direction": "forward", "offset": 10}, []),
        ({"direction": "backward"}, list(range(10, 0, -1))),
        ({"direction": "backward", "limit": 3}, [10, 9, 8]),
        ({"direction": "backward", "offset": 5, "limit": 2}, [4, 3]),
        ({"direction": "backward", "offset": 2}, [1]),
        ({"limit": 0}, []),
        ({}, list(range(1, 11))),
    ],
)
def test_a_call_with_a_range_gives_the_processor_exactly_that_history(history_range, event_ids):
    with serving():
        pid = started()
        seen = seen_by_call(pid, history_range=history_range)

    assert seen == {"task_type": "call", "history": event_ids, "range": history_range, "context": None}
    assert Task.objects.get(process__process_id=pid, task_type="call").metadata == {"range": history_range}


def test_the_namespaces_range_is_the_default_and_a_calls_range_replaces_it():
    with serving(namespaces={"test.ranged": 2}):
        pid = started("test.ranged")
        by_default = seen_by_call(pid, "test.ranged")
        asked = seen_by_call(pid, "test.ranged", history_range={"offset": 1, "limit": 2})
        everything = seen_by_call(pid, "test.ranged", history_range={})

    assert (by_default["history"], by_default["range"]) == ([10, 9], {"direction": "backward", "limit": 2})
    assert (asked["history"], asked["range"]) == ([2, 3], {"offset": 1, "limit": 2})
    assert everything["history"] == list(range(1, 11))


def test_init_and_repair_take_a_range_too():
    pid = new_id()
    with serving():
        seen_at_init = services.process_init(
            namespace=NS, process_id=pid, args={"observe": True, **TEN_EVENTS}, history_range={"limit": 1}
        )
        with pytest.raises(services.ProcessorError):
            services.process_call(namespace=NS, process_id=pid, args={"error": "boom"})
        seen_at_repair = services.process_repair(
            namespace=NS,
            process_id=pid,
            args={"observe": True},
            history_range={"direction": "backward", "offset": 9, "limit": 3},
        )

    assert seen_at_init == {"task_type": "init", "history": [], "range": {"limit": 1}, "context": None}
    assert (seen_at_repair["task_type"], seen_at_repair["history"]) == ("repair", [8, 7, 6])
    assert process_get(namespace=NS, process_id=pid)["status"] == "running"


def test_the_timer_a_ranged_call_sets_gets_the_namespaces_range():
    with serving():
        pid = started()
        services.process_call(
            namespace=NS,
            process_id=pid,
            args={"aux_state": {"on_timeout": [{"observe": True}]}, "action": {"set_timer": 0}},
            history_range={"limit": 1},
        )
        wait_for(lambda: "observed" in Process.objects.get(process_id=pid).aux_state, what="the timeout")

    seen = Process.objects.get(process_id=pid).aux_state["observed"]
    assert (seen["task_type"], seen["history"], seen["range"]) == ("timeout", list(range(1, 11)), {})


def test_a_calls_context_reaches_its_processor_and_the_timers_it_sets():
    with serving():
        pid = started()
        seen = services.process_call(
            namespace=NS,
            process_id=pid,
            args={"observe": True, "aux_state": {"on_timeout": [{"observe": True}]}, "action": {"set_timer": 0}},
            context={"trace_id": "abc"},
        )
        wait_for(
            lambda: Process.objects.get(process_id=pid).aux_state["observed"]["task_type"] == "timeout",
            what="the timeout",
        )

    assert seen["context"] == {"trace_id": "abc"}
    assert Process.objects.get(process_id=pid).aux_state["observed"]["context"] == {"trace_id": "abc"}


def test_simple_repairs_context_reaches_the_processor_of_the_timer_it_runs_again():
    pid = new_id()
    with serving():
        services.process_init(
            namespace=NS,
            process_id=pid,
            args={"aux_state": {"on_timeout": [{"error": "fatal"}]}, "action": {"set_timer": 0}},
        )
        wait_for(lambda: Process.objects.get(process_id=pid).status == "error", what="the timeout's error")
        Process.objects.filter(process_id=pid).update(aux_state={"on_timeout": [{"observe": True}]})
        services.process_simple_repair(namespace=NS, process_id=pid, context={"by": "operator", "ticket": 42})
        wait_for(lambda: "observed" in Process.objects.get(process_id=pid).aux_state, what="the timeout again")

    seen = Process.objects.get(process_id=pid).aux_state["observed"]
    assert (seen["task_type"], seen["context"]) == ("timeout", {"by": "operator", "ticket": 42})


def test_a_repaired_timeout_runs_again_with_its_context():
    pid = new_id()
    with serving():
        services.process_init(namespace=NS, process_id=pid)
        services.process_call(
            namespace=NS,
            process_id=pid,
            args={"aux_state": {"on_timeout": [{"error": "fatal"}]}, "action": {"set_timer": 0}},
            context={"from": "the call"},
        )
        wait_for(lambda: Process.objects.get(process_id=pid).status == "error", what="the timeout's error")
        services.process_repair(namespace=NS, process_id=pid, args={"aux_state": {"on_timeout": [{"observe": True}]}})
        wait_for(lambda: "observed" in Process.objects.get(process_id=pid).aux_state, what="the timeout again")

    assert Process.objects.get(process_id=pid).aux_state["observed"]["context"] == {"from": "the call"}


BAD_RANGES = [
    [],
    "forward",
    {"offset": -1},
    {"offset": MAX_EVENT_ID + 1},
    {"limit": 10**30},
    {"limit": -5},
    {"offset": "3"},
    {"limit": 2.0},
    {"offset": True},
    {"limit": None},
    {"direction": "sideways"},
    {"direction": 1},
    {"direction": ["backward"]},
    {"bogus": 1},
    {1: 2, "limit": 1},
]


@pytest.mark.parametrize("history_range", BAD_RANGES)
@pytest.mark.parametrize("operation", [services.process_init, services.process_call, services.process_repair])
def test_a_malformed_range_is_refused_before_anything_is_written(operation, history_range):
    with pytest.raises(InvalidInputError, match="range"):
        operation(namespace=NS, process_id=new_id(), history_range=history_range)
    assert not Task.objects.exists() and not Process.objects.exists()


@pytest.mark.parametrize(
    "request_fields",
    [
        {"idempotency_key": 123},
        {"idempotency_key": ""},
        {"idempotency_key": "k" * 1025},
        {"idempotency_key": "\U0001f600" * 600},  # 600 characters, 2,400 bytes
        {"idempotency_key": "a\x00b"},
        {"context": float("nan")},
        {"args": {"bad": "\x00"}},
    ],
)
def test_a_malformed_request_is_refused_before_anything_is_written(request_fields):
    with pytest.raises(InvalidInputError):
        services.process_init(namespace=NS, process_id=new_id(), **request_fields)
    assert not Task.objects.exists() and not Process.objects.exists()
