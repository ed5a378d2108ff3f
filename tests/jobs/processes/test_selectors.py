"""Reads racing writers: each answer is one state of the process (or not found)."""

from jobs.processes import selectors, services
from pipeline_project.api.errors import NotFoundError
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.jobs.processes.helpers import (
    CYCLES,
    check_process,
    check_trace,
    cycle_through_statuses,
    new_id,
    outcome,
    readers_racing,
    remove_one_after_another,
    serving,
)

pytestmark = ALL_DATABASES_COMMITTED
NS = "test.scripted"


def test_get_and_trace_during_state_changes_see_one_state():
    pid = new_id()
    with serving():
        services.process_init(namespace=NS, process_id=pid)
        answers = readers_racing(
            cycle_through_statuses(pid),
            lambda: (
                selectors.process_get(namespace=NS, process_id=pid),
                selectors.process_trace(namespace=NS, process_id=pid),
            ),
        )

    assert len(answers) > CYCLES and not [a for a in answers if isinstance(a, Exception)]
    for got, tasks in answers:
        check_process(got)
        check_trace(tasks)
    assert {got["status"] for got, _tasks in answers} == {"running", "error"}


def test_get_and_trace_during_removal_answer_the_process_or_not_found():
    current = [new_id()]

    def read():
        pid = current[0]
        return (
            outcome(lambda: selectors.process_get(namespace=NS, process_id=pid)),
            outcome(lambda: selectors.process_trace(namespace=NS, process_id=pid)),
        )

    with serving():
        answers = readers_racing(remove_one_after_another(current), read)

    gets = [got for got, _trace in answers]
    traces = [trace for _got, trace in answers]
    for found, expected_type in ((gets, dict), (traces, list)):
        gone = [answer for answer in found if not isinstance(answer, expected_type)]
        assert len(gone) < len(found) and all(isinstance(answer, NotFoundError) for answer in gone), gone[:3]
        assert gone, "no read fell after a removal: the race was not run"
    for got in gets:
        if isinstance(got, dict):
            check_process(got)
            assert got["last_event_id"] == 2  # the removing call's event is never stored
    for tasks in traces:
        if isinstance(tasks, list):
            assert [len(task["events"]) for task in tasks] in ([2], [2, 0]), tasks
