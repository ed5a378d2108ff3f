"""Every list's actions, the project's and Django's own, refuse posted ids that are not the
model's keys with a message (Django's filter raised on them: a 500), and act on none."""

import pytest
from django.contrib import admin
from django.contrib.admin import helpers
from django.contrib.messages import get_messages
from django.core.exceptions import ValidationError
from django.test import Client, RequestFactory
from django.urls import reverse

from pipeline_project.web.admin_site import PipelineAdminSite
from tests.conftest import ALL_DATABASES

pytestmark = ALL_DATABASES


def lists_with_actions(user) -> list[tuple[str, str, object]]:
    """Each list whose actions ``user`` has: its path, its first action, its model's key field."""
    request = RequestFactory().get("/")
    request.user = user
    return [
        (
            reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist"),
            next(iter(actions)),
            model._meta.pk,
        )
        for model, model_admin in admin.site._registry.items()
        if (actions := model_admin.get_actions(request))
    ]


def is_a_key(field, value: str) -> bool:
    try:
        field.to_python(value)
    except ValidationError:
        return False
    return True


def test_the_site_is_the_projects_and_view_site_leads_to_the_operators_pages():
    assert isinstance(admin.site, PipelineAdminSite) and admin.site.site_url == "/pipeline/"


@pytest.mark.parametrize("posted", ["not-an-id", "1; DROP TABLE dl_jobs", "x" * 1000])
def test_an_action_on_ids_not_the_models_is_refused_with_a_message(admin_user, posted):
    lists = lists_with_actions(admin_user)
    assert {path for path, _, _ in lists} >= {
        "/admin/jobs/job/",
        "/admin/auth/user/",
        "/admin/tracking/pipelinetracking/",
    }

    for path, action, key in lists:
        client = Client()  # messages of its own
        client.force_login(admin_user)
        response = client.post(path, {"action": action, "index": 0, helpers.ACTION_CHECKBOX_NAME: [posted]})
        messages = [str(message) for message in get_messages(response.wsgi_request)]
        refused = [message for message in messages if message.endswith("nothing was done.")]
        if is_a_key(key, posted):  # a text key (a name): Django's own answer, an action on no row
            assert response.status_code in (200, 302) and not refused, (path, response.status_code, messages)
        else:
            assert (response.status_code, response.headers["Location"]) == (302, path), (path, messages)
            assert refused == [
                f"The selected rows were not this list's ({posted[:40]!r} is no {key.model._meta.verbose_name} id): nothing was done."
            ]
