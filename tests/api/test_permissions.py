"""Who may call the API: a token what its scopes allow; a staff session what its model permissions
allow, and an operator's action only with that action's permission."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from rest_framework.test import APIClient

from jobs.queue.models import Job, Queue
from pipeline_project.api.errors import InvalidInputError
from pipeline_project.core import services as core_services
from pipeline_project.core.models import ApiToken
from tests.conftest import ALL_DATABASES
from tests.jobs.conftest import enqueue

pytestmark = ALL_DATABASES

TRIGGER = {"queue": "q", "task": "jobs.noop", "lock_key": "k"}


def staff(*codenames: str) -> APIClient:
    user = get_user_model().objects.create_user("ops", password="x", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    client = APIClient()
    client.force_login(user)
    return client


def calls(job_id) -> dict:
    return {
        "list jobs": ("get", "/api/v1/jobs", None),
        "job status": ("get", f"/api/v1/jobs/{job_id}/status", None),
        "trigger": ("post", "/api/v1/jobs/trigger", TRIGGER),
        "cancel": ("post", f"/api/v1/jobs/{job_id}/cancel", None),
        "delete": ("delete", f"/api/v1/jobs/{job_id}?dry_run=true", None),
        "retry matching": ("post", "/api/v1/jobs/retry", {"filters": {"queue": "q"}, "dry_run": True}),
        "tracking summary": ("get", "/api/v1/pipeline/metrics/summary", None),
        "register a file": ("post", "/api/v1/pipeline/files/register", {"filename": "f", "shards": [0]}),
        "claim": ("post", "/api/v1/pipeline/queues/shard-splitter/claim", {"limit": 1}),
        "queues": ("get", "/api/v1/queues", None),
        "pause": ("post", "/api/v1/queues/q/pause", None),
    }


@pytest.mark.parametrize(
    ("codenames", "allowed"),
    [
        ((), set()),
        (("view_job",), {"list jobs", "job status"}),
        (("view_job", "add_job"), {"list jobs", "job status", "trigger"}),
        (("change_job",), {"list jobs", "job status"}),  # an operator's action needs its own permission
        (("view_job", "cancel_job"), {"list jobs", "job status", "cancel"}),
        (("retry_job",), {"retry matching"}),
        (("delete_job", "view_job"), {"list jobs", "job status", "delete"}),
        (("view_pipelinetracking",), {"tracking summary"}),
        (("add_pipelinetracking",), {"register a file"}),
        (("change_pipelinetracking",), {"tracking summary", "claim"}),
        (("view_queue", "change_queue"), {"queues"}),
        (("view_queue", "pause_queue"), {"queues", "pause"}),
    ],
)
def test_a_staff_session_needs_the_model_permission_for_each_call(codenames, allowed):
    client = staff(*codenames)
    job_id = enqueue(task="t", queue="q").job_id

    answers = {
        name: getattr(client, method)(path, body, format="json").status_code
        for name, (method, path, body) in calls(job_id).items()
    }

    assert {name for name, status in answers.items() if status != 403} == allowed, answers
    assert Job.objects.filter(queue="q").count() == 1 + ("trigger" in allowed)


def test_a_token_with_every_scope_has_the_whole_api(api):
    job_id = enqueue(task="t", queue="q").job_id

    for name, (method, path, body) in calls(job_id).items():
        assert getattr(api, method)(path, body, format="json").status_code < 400, name


READS = {"list jobs", "job status", "tracking summary", "queues"}
WRITES = {"trigger", "register a file", "claim", "cancel"}  # cancel: seed 002's, a daemon's call
OPERATIONS = {"delete", "retry matching", "pause"}


@pytest.mark.parametrize(
    ("scopes", "allowed"),
    [
        (["read"], READS),
        (["read", "write"], READS | WRITES),  # a daemon's, the default
        (["write"], WRITES),
        (["operate"], OPERATIONS | {"cancel"}),  # an operator may do what a daemon's cancel does
        (["read", "operate"], READS | OPERATIONS | {"cancel"}),
        (["read", "write", "operate"], READS | WRITES | OPERATIONS),
    ],
)
def test_a_token_has_what_its_scopes_allow_and_a_403_in_the_error_shape_beyond(scopes, allowed):
    _token, key = core_services.api_token_create(name="scoped", scopes=scopes)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    job_id = enqueue(task="t", queue="q").job_id

    answers = {
        name: getattr(client, method)(path, body, format="json") for name, (method, path, body) in calls(job_id).items()
    }

    assert {name for name, answer in answers.items() if answer.status_code != 403} == allowed
    for name in answers.keys() - allowed:
        refusal = answers[name].json()
        assert refusal["code"] == "permission_denied" and "do not include" in refusal["message"]
        accepted = ["read"] if name in READS else ["operate"] if name in OPERATIONS else ["write"]
        if name == "cancel":
            accepted = ["write", "operate"]
        assert refusal["details"] == {"scopes_accepted": accepted, "token_scopes": scopes}
    # What was refused wrote nothing.
    status = Job.objects.get(job_id=job_id).status
    assert (status, Job.objects.filter(queue="q").count()) == (
        "canceled" if "cancel" in allowed else "queued",
        1 + ("trigger" in allowed),
    )
    assert Queue.objects.filter(name="q", paused=True).exists() == ("pause" in allowed)


def test_a_new_token_reads_and_writes_but_does_not_operate():
    token, _key = core_services.api_token_create(name="daemon")
    assert token.scopes == ["read", "write"]


@pytest.mark.parametrize("scopes", [[], ["admin"], ["read", "everything"]])
def test_a_token_needs_known_scopes(scopes):
    with pytest.raises(InvalidInputError):
        core_services.api_token_create(name="daemon", scopes=scopes)
    assert not ApiToken.objects.exists()


def test_a_non_staff_user_has_none_of_it():
    user = get_user_model().objects.create_user("someone", password="x")
    user.user_permissions.set(Permission.objects.all())
    client = APIClient()
    client.force_login(user)

    assert client.get("/api/v1/jobs").status_code == 403


@pytest.mark.parametrize("path", ["/api/v1/schema", "/api/v1/docs"])
def test_schema_and_docs_need_the_apis_access(anonymous, api, path):
    assert anonymous.get(path).status_code == 401
    assert api.get(path).status_code == 200
    assert staff().get(path).status_code == 200  # staff without model permissions may read the docs
    assert anonymous.get("/health").status_code == 200
