import threading
import time
import uuid
from collections.abc import Callable
from contextlib import contextmanager
from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone

import tests.jobs.processes.processors  # noqa: F401  (registers the test.* namespaces)
from jobs.processes import services
from jobs.processes.models import Process, Running, Task
from jobs.runtime.config import WorkerConfig
from tests.jobs.helpers import FAST, worker_in_thread


@contextmanager
def serving(namespaces=None, **overrides):
    """A worker runtime serving process namespaces in a thread of the test process, stopped on exit."""
    namespaces = namespaces or {"test.scripted": 4, "test.quick": 2}
    with worker_in_thread(WorkerConfig.from_settings({"namespace": namespaces}, **{**FAST, **overrides})) as worker:
        yield worker


def thread(target, **kwargs) -> threading.Thread:
    """A started thread running ``target(**kwargs)`` that closes its database connections when done."""

    def run():
        try:
            target(**kwargs)
        finally:
            connections.close_all()

    started = threading.Thread(target=run, daemon=True)
    started.start()
    return started


def new_id() -> str:
    return f"p-{uuid.uuid4().hex[:12]}"


def plant_running_task(namespace: str, *, deadline_in_sec: float, worker: str = "gone") -> Task:
    """A running process whose timeout task a worker claimed and left in dl_proc_running (a
    worker killed mid-task), its deadline ``deadline_in_sec`` from now (negative: passed)."""
    now = timezone.now()
    process = Process.objects.create(
        namespace=namespace, process_id=new_id(), status="running", status_changed_at=now, created_at=now
    )
    task = Task.objects.create(
        process=process, task_type="timeout", status="running", scheduled_time=now, running_time=now
    )
    Running.objects.create(
        process=process,
        task=task,
        namespace=namespace,
        task_type="timeout",
        running_time=now,
        deadline=now + timedelta(seconds=deadline_in_sec),
        worker=worker,
    )
    return task


def readers_racing(write: Callable[[], None], read: Callable[[], object], *, readers: int = 3) -> list:
    """``read()`` in ``readers`` threads, again and again, while ``write()`` runs in this one;
    every answer (or the exception raised instead), in the order each reader got them."""
    writing = threading.Event()
    writing.set()
    answers: list[list] = [[] for _ in range(readers)]

    def reading(mine: list) -> None:
        while writing.is_set():
            try:
                mine.append(read())
            except Exception as exc:  # noqa: BLE001 - judged by the test
                mine.append(exc)

    started = [thread(reading, mine=mine) for mine in answers]
    try:
        write()
    finally:
        writing.clear()
        for reader in started:
            reader.join(30)
    return [answer for mine in answers for answer in mine]


# Writers for readers to race, and what a reader must see: one state of the process.

CYCLES = 40


def cycle_through_statuses(pid: str) -> Callable[[], None]:
    """Writes: a call adds an event, a failing call puts the process in error, a repair (one
    event) back to running; CYCLES times."""

    def write() -> None:
        for n in range(CYCLES):
            services.process_call(namespace="test.scripted", process_id=pid, args={"events": [n]})
            with pytest.raises(services.ProcessorError):
                services.process_call(namespace="test.scripted", process_id=pid, args={"error": "boom"})
            services.process_repair(namespace="test.scripted", process_id=pid, args={"events": ["repaired"]})

    return write


def check_process(got: dict) -> None:
    """A process as it was at one moment: its status agrees with its error fields, its history
    with its last event id."""
    if got["status"] == "error":
        assert (got["previous_status"], got["detail"]) == ("running", "boom") and got["corrupted_by"], got
    else:
        assert (got["status"], got["detail"], got["corrupted_by"]) == ("running", None, None), got
    assert [event["event_id"] for event in got["history"]] == list(range(1, got["last_event_id"] + 1)), got


def check_trace(tasks: list[dict]) -> None:
    """A trace as it was at one moment: each finished call or repair has its one event, no other task has any."""
    for task in tasks:
        expected = 1 if task["status"] == "finished" and task["task_type"] in ("call", "repair") else 0
        assert len(task["events"]) == expected, tasks


def remove_one_after_another(current: list) -> Callable[[], None]:
    """Writes: CYCLES processes, each started with events and removed by its next call;
    ``current[0]`` names the one alive."""

    def write() -> None:
        for _ in range(CYCLES):
            pid = new_id()
            services.process_init(namespace="test.scripted", process_id=pid, args={"events": ["a", "b"]})
            current[0] = pid
            time.sleep(0.005)
            services.process_call(namespace="test.scripted", process_id=pid, args={"events": ["c"], "action": "remove"})

    return write


def outcome(read: Callable[[], object]) -> object:
    try:
        return read()
    except Exception as exc:  # noqa: BLE001 - judged by the test
        return exc


def planted_process(*, events: int, tasks: int, status: str = "error") -> Process:
    """A process of test.scripted with ``tasks`` finished timeout tasks 10 s apart and ``events``
    events (of its last task), each inserted in one statement, the tables analyzed as a year's
    would be."""
    now = timezone.now()
    process = Process.objects.create(
        namespace="test.scripted",
        process_id=new_id(),
        status=status,
        previous_status="running" if status == "error" else None,
        detail="boom" if status == "error" else None,
        status_changed_at=now,
        created_at=now,
        last_event_id=events,
    )
    with connections["default"].cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO dl_proc_tasks (process_pk, task_type, status, scheduled_time, running_time, finished_time,
                                       args, response, last_retry_interval, attempts_count)
            SELECT %(process)s, 'timeout', 'finished', t, t + interval '12 ms', t + interval '40 ms',
                   jsonb_build_object('n', i), '"ok"', 0, 1
            FROM generate_series(1, %(tasks)s) AS i, LATERAL (SELECT now() - (%(tasks)s - i) * interval '10 s' AS t) AS at
            """,
            {"process": process.id, "tasks": tasks},
        )
        cursor.execute(
            """
            INSERT INTO dl_proc_events (process_pk, task_id, event_id, timestamp, payload)
            SELECT %(process)s, (SELECT max(task_id) FROM dl_proc_tasks WHERE process_pk = %(process)s), e,
                   now() - (%(events)s - e) * interval '1 s', jsonb_build_object('n', e, 'stage', 'packed')
            FROM generate_series(1, %(events)s) AS e
            """,
            {"process": process.id, "events": events},
        )
        cursor.execute("ANALYZE dl_proc_tasks, dl_proc_events")
    return process
