"""The processes admin, rendered through the test client; each page one snapshot."""

import re
import time
import uuid
from contextlib import suppress

from django.db import connection
from django.test import Client

from jobs.processes import services
from jobs.processes.console.process_page import EVENTS_SHOWN, TASKS_SHOWN
from jobs.processes.models import Process, Task
from pipeline_project.web.arguments import MASK
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.helpers import staff_client
from tests.ingestion.bounded_reads import rows_read
from tests.jobs.processes.helpers import CYCLES, planted_process, readers_racing, serving

pytestmark = ALL_DATABASES_COMMITTED
CHANGELIST = "/admin/processes/process/"


def started(**args):
    pid = f"p-{uuid.uuid4().hex[:12]}"
    services.process_init(namespace="test.scripted", process_id=pid, args=args or None)
    return Process.objects.get(process_id=pid)


def test_changelist_filters_search_and_a_process_page_with_tasks_and_events(admin_client):
    with serving():
        one = started(events=["hello"], action={"set_timer": 600})
        other = started()

    listed = admin_client.get(CHANGELIST, {"status__exact": "running", "namespace": "test.scripted"})
    assert listed.status_code == 200 and one.process_id in listed.text and other.process_id in listed.text
    searched = admin_client.get(CHANGELIST, {"q": one.process_id})
    assert one.process_id in searched.text and other.process_id not in searched.text
    page = admin_client.get(f"{CHANGELIST}{one.pk}/change/")
    assert page.status_code == 200 and "hello" in page.text and "timeout" in page.text
    assert admin_client.get(CHANGELIST, {"status__exact": "%00"}).status_code in (200, 400)


def test_namespaces_page_counts_by_status_and_lists_timers_due(admin_client):
    with serving():
        process = started(action={"set_timer": 600})

    page = admin_client.get(f"{CHANGELIST}namespaces/")
    assert page.status_code == 200
    assert "test.scripted" in page.text and process.process_id in page.text


def test_simple_repair_action_puts_processes_in_error_back_to_running(admin_client):
    with serving():
        broken = started()
        with suppress(services.ProcessorError):
            services.process_call(namespace="test.scripted", process_id=broken.process_id, args={"error": "boom"})
        healthy = started()

    response = admin_client.post(
        CHANGELIST,
        {"action": "simple_repair_processes", "_selected_action": [broken.pk, healthy.pk]},
        follow=True,
    )

    assert [str(message) for message in response.context["messages"]] == [
        "1 process(es) set running; 1 not in error left alone."
    ]
    assert Process.objects.get(pk=broken.pk).status == "running"
    assert Task.objects.filter(process=broken, task_type="call", status="error").exists()


def test_every_admin_page_reads_the_processes_in_one_repeatable_read_transaction(admin_client):
    with serving():
        process = started(events=["hello"], action={"set_timer": 600})
    pages = [
        CHANGELIST,
        f"{CHANGELIST}?namespace=test.scripted&status__exact=running",
        f"{CHANGELIST}{process.pk}/change/",
        f"{CHANGELIST}{process.pk}/history/",
        f"{CHANGELIST}namespaces/",
    ]
    for page in pages:
        transactions, statements = [], []

        def record(execute, sql, params, many, context, *, transactions=transactions, statements=statements):
            outermost = connection.atomic_blocks[0] if connection.atomic_blocks else None
            if "REPEATABLE READ" in sql:
                transactions.append(outermost)
            elif "dl_proc" in sql or "dl_processes" in sql:
                statements.append(outermost)
            return execute(sql, params, many, context)

        with connection.execute_wrapper(record):
            assert admin_client.get(page).status_code == 200, page
        assert len(transactions) == 1 and transactions[0] is not None, page
        assert statements and all(block is transactions[0] for block in statements), page


def test_a_process_page_during_removal_is_shown_or_not_found_never_an_error(admin_user):
    current = [None]

    def read():
        client = Client()
        client.force_login(admin_user)
        return client.get(f"{CHANGELIST}{current[0]}/change/").status_code if current[0] else 200

    def write():
        for _ in range(CYCLES):
            process = started(events=["a"])
            current[0] = process.pk
            time.sleep(0.01)
            services.process_call(namespace="test.scripted", process_id=process.process_id, args={"action": "remove"})

    with serving():
        answers = readers_racing(write, read)

    # A process removed is a 404 (its page's live refresh says it is gone), never an error.
    assert set(answers) == {200, 404}, [answer for answer in answers if answer not in (200, 404)][:3]


def test_a_process_with_10000_events_shows_a_page_of_them_and_reads_no_more_whatever_it_holds(admin_client):
    process = planted_process(events=10_000, tasks=3_000)
    page = f"{CHANGELIST}{process.pk}/change/"

    answer, read = rows_read(admin_client.get, page, tables={"dl_proc_events", "dl_proc_tasks"})
    newest = answer.text

    assert shown_ids("event", newest) == list(range(10_000, 10_000 - EVENTS_SHOWN, -1))
    assert len(re.findall(r'id="task-\d+"', newest)) == TASKS_SHOWN
    assert "the process's last event is 10000" in newest
    assert read and max(read.values()) <= EVENTS_SHOWN + 1, read  # a page and one more, of 10,000
    older = admin_client.get(page, {"events_to": 10_000 - EVENTS_SHOWN}).text
    assert shown_ids("event", older) == list(range(10_000 - EVENTS_SHOWN, 10_000 - 2 * EVENTS_SHOWN, -1))
    oldest = admin_client.get(page, {"events_to": 3}).text
    assert shown_ids("event", oldest) == [3, 2, 1] and "Older »" not in oldest.split('id="process-events"')[1]


def shown_ids(kind: str, page: str) -> list[int]:
    return [int(n) for n in re.findall(rf'data-{kind}="(\d+)"', page)]


def test_a_process_page_pages_its_tasks_by_id_and_links_each_event_to_its_task(admin_client):
    process = planted_process(events=3, tasks=50)
    page = f"{CHANGELIST}{process.pk}/change/"
    first = admin_client.get(page).text
    task_ids = [int(n) for n in re.findall(r'id="task-(\d+)"', first)]
    assert len(task_ids) == TASKS_SHOWN and task_ids == sorted(task_ids, reverse=True)

    older = admin_client.get(page, {"tasks_to": task_ids[-1] - 1}).text
    assert int(re.search(r'id="task-(\d+)"', older).group(1)) == task_ids[-1] - 1
    [link] = set(re.findall(r'href="(\?tasks_to=\d+#task-\d+)"', first))  # the events' one task
    assert link == f"?tasks_to={task_ids[0]}#task-{task_ids[0]}"


def test_a_process_page_masks_secret_task_args_unless_the_user_may_view_arguments(admin_client):
    with serving():
        process = started(events=["hello"])
    Task.objects.filter(process=process).update(
        args={"events": ["hello"], "credentials": {"user": "u", "pw": "hunter2-value"}}
    )
    reading = ("processes.view_process", "processes.view_task", "processes.view_event")
    viewer = staff_client(*reading, client=Client())
    allowed = staff_client(*reading, "jobs.view_job_arguments", client=Client())
    page = f"{CHANGELIST}{process.pk}/change/"

    masked, shown = viewer.get(page).content.decode(), allowed.get(page).content.decode()

    assert "hunter2-value" not in masked and MASK in masked and "hello" in masked
    assert "hunter2-value" in shown and MASK not in shown and "hunter2-value" in admin_client.get(page).content.decode()
