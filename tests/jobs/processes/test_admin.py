"""The processes admin, rendered through the test client."""

import uuid

from jobs.processes import services
from jobs.processes.models import Process, Task
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.jobs.processes.helpers import serving

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
        try:
            services.process_call(namespace="test.scripted", process_id=broken.process_id, args={"error": "boom"})
        except services.ProcessorError:
            pass
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
