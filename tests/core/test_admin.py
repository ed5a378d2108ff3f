"""The admin as a whole: hostile filter values never reach the database, every action declares its permission."""

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from pipeline_project.core import services
from pipeline_project.core.models import ApiToken
from tests.conftest import ALL_DATABASES

pytestmark = ALL_DATABASES

HOSTILE = [
    {"status__exact": "bogus"},
    {"status__in": "queued,bogus"},
    {"queue": "\x00"},
    {"task": "\x00"},
    {"shard_worker_status__exact": "\x00"},
    {"shard_worker_status__exact": "bogus"},
    {"shard": "abc"},
    {"shard__gte": "1e999"},
    {"created_at__gte": "not a date"},
    {"revoked_at__isnull": "maybe"},
    {"o": "999"},
    {"o": "-x.1"},
    {"p": "-1"},
    {"p": "abc"},
    {"q": "x" * 5000},
    {"q": '{"json": 1}'},
    {"no_such_field": "1"},
    {"pk__in": "1,2,abc"},
    {"_changelist_filters": "status__exact=bogus"},
]


def changelists() -> list[str]:
    return [f"/admin/{model._meta.app_label}/{model._meta.model_name}/" for model in admin.site._registry]


@pytest.mark.parametrize("params", HOSTILE, ids=[next(iter(params)) for params in HOSTILE])
def test_hostile_changelist_parameters_never_cause_a_server_error(admin_client, params):
    for url in changelists():
        response = admin_client.get(url, params)
        assert response.status_code < 500, (url, params, response.status_code)


def test_every_admin_action_declares_its_permission():
    for model, model_admin in admin.site._registry.items():
        for action in model_admin._get_base_actions():
            assert getattr(action.func, "allowed_permissions", None), (
                f"{model.__name__}: {action.name} has no permissions"
            )


def test_a_view_only_user_cannot_revoke_tokens(client):
    token, _key = services.api_token_create(name="daemon")
    user = get_user_model().objects.create_user("viewer", password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_apitoken"))
    client.force_login(user)

    page = client.get("/admin/core/apitoken/").content.decode()
    response = client.post("/admin/core/apitoken/", {"action": "revoke_tokens", "_selected_action": [token.pk]})

    assert "revoke_tokens" not in page
    assert response.status_code in (200, 302, 403)
    assert ApiToken.objects.get().revoked_at is None


def test_a_big_tables_list_pages_by_key_newest_first_and_counts_from_the_counts(admin_client):
    from jobs.queue import services as job_services
    from jobs.queue.models import Job

    job_services.job_enqueue_many(
        specs=[job_services.JobSpec(queue="paged", task="t", lock_key=f"k{n}") for n in range(250)]
    )
    newest_first = [str(job_id) for job_id in Job.objects.order_by("-job_id").values_list("job_id", flat=True)]

    pages, url = [], "/admin/jobs/job/?queue=paged"
    while url:
        page = admin_client.get(url)
        assert page.status_code == 200 and "250 jobs" in page.text  # the count the triggers keep
        pages.append([job_id for job_id in newest_first if f"/admin/jobs/job/{job_id}/change/" in page.text])
        assert ("« Newest" in page.text) == (len(pages) > 1)
        older = page.context["cl"].older_url
        url = f"/admin/jobs/job/{older}" if older else None
    assert [len(shown) for shown in pages] == [100, 100, 50]
    assert [job_id for shown in pages for job_id in sorted(shown, key=newest_first.index)] == newest_first

    searched = admin_client.get("/admin/jobs/job/", {"q": "k7"})  # a search: its count unknown, not counted
    assert searched.status_code == 200 and not searched.context["cl"].counted and "1 job\n" in searched.text
    assert admin_client.get("/admin/jobs/job/", {"before": "not-a-job-id"}).status_code == 302  # ?e=1


def test_a_token_made_in_the_admin_has_the_scopes_chosen_and_the_list_shows_them(admin_client):
    response = admin_client.post("/admin/core/apitoken/add/", {"name": "operator", "scopes": "read,operate"})

    assert response.status_code == 302
    token = ApiToken.objects.get()
    assert token.scopes == ["read", "operate"]
    page = admin_client.get("/admin/core/apitoken/").content.decode()
    assert "read" in page and "operate" in page


def test_the_admin_refuses_an_unknown_scope(admin_client):
    response = admin_client.post("/admin/core/apitoken/add/", {"name": "operator", "scopes": "read,admin"})

    assert response.status_code == 200 and not ApiToken.objects.exists()  # the form again, with its error


def test_the_index_names_processes_in_english_and_view_site_leads_to_the_pipeline_pages(admin_client):
    page = admin_client.get("/admin/").content.decode()

    assert "Processes" in page and "Processs" not in page
    assert '<a href="/pipeline/">View site</a>' in page


def test_the_token_list_filters_by_state_active_or_revoked(admin_client):
    services.api_token_create(name="still-working")
    revoked, _key = services.api_token_create(name="given-back")
    services.api_token_revoke(token_id=revoked.pk)

    page = admin_client.get("/admin/core/apitoken/").content.decode()
    shown = {
        state: admin_client.get("/admin/core/apitoken/", {"state": state}).content.decode()
        for state in ("active", "revoked")
    }

    assert "By state" in page and ">Active<" in page and ">Revoked<" in page
    assert "By revoked at" not in page and "Not empty" not in page
    assert "still-working" in shown["active"] and "given-back" not in shown["active"]
    assert "given-back" in shown["revoked"] and "still-working" not in shown["revoked"]


def test_a_pages_breadcrumbs_name_the_app_once_when_it_has_the_models_name(admin_client):
    dashboard = admin_client.get("/admin/jobs/job/dashboard/").content.decode()
    tree = admin_client.get("/admin/dbstates/state/tree/").content.decode()

    crumbs = dashboard.split('<ol class="breadcrumbs">')[1].split("</ol>")[0]
    assert crumbs.count(">Jobs<") == 1 and 'href="/admin/jobs/job/"' in crumbs and '/admin/jobs/"' not in crumbs
    assert 'href="/admin/dbstates/">Database states<' in tree and 'href="/admin/dbstates/state/">States<' in tree


def test_the_audit_trail_counts_its_entries_and_its_list_counts_entries_not_trails(admin_client):
    from jobs.queue import services as job_services

    job_id = job_services.job_enqueue(spec=job_services.JobSpec(queue="q", task="t", lock_key="k")).job_id
    page = f"/admin/jobs/job/{job_id}/change/"
    assert "No operator has acted on it yet." in admin_client.get(page).content.decode()
    assert "0 audit entries" in admin_client.get("/admin/audit/auditentry/").content.decode()

    admin_client.post(f"/admin/jobs/job/{job_id}/act/cancel/", {"confirmed": "yes"})

    assert "Audit trail (1 entry)" in admin_client.get(page).content.decode()
    listed = admin_client.get("/admin/audit/auditentry/").content.decode()
    assert "1 audit entry" in listed and "audit trail\n" not in listed.split('class="paginator"')[1]


def test_datetimes_read_to_the_second_with_their_zone(admin_client):
    token, _key = services.api_token_create(name="daemon")

    page = admin_client.get("/admin/core/apitoken/").content.decode()

    assert f"{token.created_at:%Y-%m-%d %H:%M:%S} UTC" in page
