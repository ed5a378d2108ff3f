"""Namespaces: a processor gets the task's context when it declares a ``context`` parameter;
a namespace's default range is checked when it is registered."""

import pytest

from jobs.processes.namespaces import Namespace, ProcessView

VIEW = ProcessView(
    process_id="p",
    namespace="n",
    status="running",
    detail=None,
    aux_state=None,
    metadata=None,
    last_event_id=0,
)


def plain(task_type, args, process):
    return {"response": [task_type, args]}


def with_context(task_type, args, process, context=None):
    return {"response": context}


def with_keywords(task_type, args, process, **extra):
    return {"response": extra}


class Callable:
    def __call__(self, task_type, args, process, *, context):
        return {"response": context}


@pytest.mark.parametrize(
    ("processor", "answer"),
    [
        (plain, ["call", 1]),
        (with_context, {"by": "op"}),
        (with_keywords, {"context": {"by": "op"}}),
        (Callable(), {"by": "op"}),
    ],
)
def test_the_context_goes_to_processors_that_declare_it(processor, answer):
    definition = Namespace(name="n", processor=processor)

    assert definition.process("call", 1, VIEW, {"by": "op"}) == {"response": answer}


@pytest.mark.parametrize("history_range", [{"limit": -1}, {"direction": "up"}, {"offset": "1"}, []])
def test_a_namespace_with_a_malformed_default_range_is_refused(history_range):
    with pytest.raises(ValueError, match="range"):
        Namespace(name="n", processor=plain, history_range=history_range)
