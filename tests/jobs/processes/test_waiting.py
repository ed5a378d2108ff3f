"""Waiting for a task's end: on its NOTIFY, reading the task only when the notification cannot say."""

import uuid

from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobs.processes import services, waiting
from jobs.processes.models import Task
from jobs.processes.services import NOTIFIED_OUTCOME_MAX_BYTES
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.jobs.processes.helpers import serving

pytestmark = ALL_DATABASES_COMMITTED
NS = "test.scripted"


def outcome_reads(queries) -> int:
    return sum("SELECT t.status, t.response, p.status" in query["sql"] for query in queries)


def test_a_short_answer_comes_with_the_notification_and_the_caller_reads_nothing():
    pid = f"p-{uuid.uuid4().hex[:12]}"
    with serving():
        services.process_init(namespace=NS, process_id=pid)
        with CaptureQueriesContext(connection) as queries:
            response = services.process_call(namespace=NS, process_id=pid, args={"response": {"n": 1}})

    assert response == {"n": 1}
    assert outcome_reads(queries.captured_queries) == 0


def test_a_long_answer_is_read_once_it_has_been_notified():
    pid = f"p-{uuid.uuid4().hex[:12]}"
    long_text = "x" * (NOTIFIED_OUTCOME_MAX_BYTES + 1)
    with serving():
        services.process_init(namespace=NS, process_id=pid)
        with CaptureQueriesContext(connection) as queries:
            response = services.process_call(namespace=NS, process_id=pid, args={"response": long_text})

    assert response == long_text
    assert outcome_reads(queries.captured_queries) == 1


def test_waiting_for_an_existing_task_reads_it_first():
    pid = f"p-{uuid.uuid4().hex[:12]}"
    with serving():
        services.process_init(namespace=NS, process_id=pid)
    init = Task.objects.get(process__process_id=pid, task_type="init")

    ended = waiting.wait_for_task(init.task_id, timeout=1)

    assert (ended.status, ended.response, ended.process_status) == ("finished", "ok", "running")
