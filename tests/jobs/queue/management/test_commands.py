"""The jobs app's management commands."""

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from jobs.queue.models import Queue
from tests.conftest import ALL_DATABASES
from tests.jobs.conftest import enqueue

pytestmark = ALL_DATABASES


def run(*args) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_queues_pause_resume_and_list():
    enqueue(task="t", queue="reports")

    assert run("queues", "pause", "reports") == "reports: paused\n"
    assert run("queues", "pause", "reports") == "reports: already paused\n"
    assert run("queues", "list") == "reports\tPAUSED\tqueued 1\n"
    assert Queue.objects.get(name="reports").changed_by == "manage.py"
    assert run("queues", "resume", "reports") == "reports: resumed\n"
    assert run("queues", "list") == "reports\tactive\tqueued 1\n"


def test_queues_limit_sets_lists_and_clears_limits():
    enqueue(task="t", queue="reports")

    assert run("queues", "limit", "reports", "--max-running", "3", "--rate", "10/60s", "--per-partition") == (
        "reports: max 3 running, 10/60s started, per partition\n"
    )
    assert run("queues", "list") == (
        "reports\tactive\tqueued 1\tmax 3 running, 10/60s started (0 in the last period), per partition\n"
    )
    assert Queue.objects.get(name="reports").rate_period_sec == 60
    assert run("queues", "limit", "reports") == "reports: no limits\n"
    assert run("queues", "list") == "reports\tactive\tqueued 1\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rate", "ten"], "--rate: N/T"),
        (["--max-running", "0"], "max_running"),
        (["--rate", "5/0"], "rate_period_sec"),
    ],
)
def test_queues_limit_refuses_bad_values(args, message):
    with pytest.raises(CommandError, match=message):
        run("queues", "limit", "reports", *args)


def test_queues_refuses_a_bad_name():
    with pytest.raises(CommandError, match="Invalid queue name"):
        run("queues", "pause", "not a queue")


def test_workerhealth_for_the_reaper_reads_when_it_last_passed_over_its_tasks(settings, tmp_path):
    import os
    import time

    settings.REAPER_ALIVE_FILE = tmp_path / "reaper.alive"
    with pytest.raises(CommandError, match="no runreaper has run here"):
        run("workerhealth", "--reaper")
    settings.REAPER_ALIVE_FILE.touch()
    assert "runreaper passed over its tasks 0 s ago" in run("workerhealth", "--reaper")

    stale = time.time() - settings.REAPER_ALIVE_WITHIN_SEC - 5
    os.utime(settings.REAPER_ALIVE_FILE, (stale, stale))
    with pytest.raises(CommandError, match="last pass was"):
        run("workerhealth", "--reaper")


def test_workerhealth_answers_for_this_hosts_worker(settings):
    import socket
    import uuid
    from datetime import timedelta

    from django.utils import timezone

    from jobs.queue import services
    from jobs.queue.models import Worker

    with pytest.raises(CommandError, match="no live runworker"):
        run("workerhealth")
    services.worker_register(worker_id=uuid.uuid4(), hostname=socket.gethostname(), pid=1, queues={"default": 1})
    assert "1 live runworker(s)" in run("workerhealth")

    Worker.objects.update(heartbeat_at=timezone.now() - timedelta(seconds=4 * settings.DL_HEARTBEAT_SEC))
    with pytest.raises(CommandError):
        run("workerhealth")
