"""Recording an action: in its own transaction, only when it took effect, naming who and from where."""

import pytest
from django.contrib.auth import get_user_model
from django.test import RequestFactory

from jobs.queue.models import Queue
from pipeline_project.api.errors import ConflictError
from pipeline_project.audit.models import AuditEntry
from pipeline_project.audit.services import MAX_RECORDED_IDS, Actor, audited
from pipeline_project.core import services as core_services
from pipeline_project.web.arguments import MASK
from tests.audit.helpers import only_entry
from tests.conftest import ALL_DATABASES

pytestmark = ALL_DATABASES


@pytest.fixture
def request_by_ops():
    request = RequestFactory().post("/admin/jobs/job/", REMOTE_ADDR="203.0.113.7")
    request.user = get_user_model().objects.create_user("ops", is_staff=True)
    return request


def test_the_action_and_its_entry_are_one_transaction(request_by_ops):
    with pytest.raises(ConflictError), audited(request=request_by_ops, action="queue.pause", objects=["q"]):
        Queue.objects.create(name="q", paused=True, changed_by="ops")
        raise ConflictError("refused after writing")

    assert not Queue.objects.exists() and not AuditEntry.objects.exists()


def test_an_entry_names_who_what_which_objects_how_many_and_from_where(request_by_ops):
    with audited(request=request_by_ops, action="job.retry", objects=["a"], filter={"queue": "q"}) as entry:
        entry.objects.append("b")
        entry.count, entry.detail = 2, {"matched": 3}

    recorded = only_entry(actor="ops", via="admin", address="203.0.113.7", action="job.retry", object_type="job")
    assert (recorded.object_ids, recorded.filter, recorded.count, recorded.detail) == (
        ["a", "b"],
        {"queue": "q"},
        2,
        {"matched": 3},
    )
    assert recorded.at is not None


def test_a_dry_run_is_not_recorded(request_by_ops):
    with audited(request=request_by_ops, action="job.delete", filter={}, record=False) as entry:
        entry.count = 5

    assert not AuditEntry.objects.exists()


def test_a_long_list_of_objects_is_cut_and_the_count_says_how_many(request_by_ops):
    ids = [str(number) for number in range(MAX_RECORDED_IDS * 3)]
    with audited(request=request_by_ops, action="job.cancel", objects=ids) as entry:
        entry.count = len(ids)

    recorded = only_entry(count=len(ids))
    assert recorded.object_ids == ids[:MAX_RECORDED_IDS]


def test_the_actor_is_the_token_or_the_user_and_the_door_they_came_through():
    token, _key = core_services.api_token_create(name="nightly", scopes=["read", "operate"])
    factory = RequestFactory()
    api = factory.post("/api/v1/jobs/retry", REMOTE_ADDR="::1")
    api.auth = token
    pages = factory.post("/pipeline/runs/x/cancel", REMOTE_ADDR="unix:/run/sock")
    pages.user = get_user_model().objects.create_user("ops", is_staff=True)

    assert Actor.of_request(api) == Actor("token:nightly", "api", "::1")
    assert Actor.of_request(pages) == Actor("ops", "pipeline", None)  # no IP address to record


def test_secret_arguments_in_a_filter_are_masked_in_the_trail(request_by_ops):
    searched = {"q": 'args:{"password": "hunter2", "user": "u"}', "args": '{"api_key": "k"}', "status": "failed"}
    with audited(request=request_by_ops, action="job.retry", filter=searched) as entry:
        entry.detail = {"token": "t", "matched": 1}

    recorded = only_entry(action="job.retry")
    assert recorded.filter == {
        "q": f'args:{{"password": "{MASK}", "user": "u"}}',
        "args": f'{{"api_key": "{MASK}"}}',
        "status": "failed",
    }
    assert recorded.detail == {"token": MASK, "matched": 1}
