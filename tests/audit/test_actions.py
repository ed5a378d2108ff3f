"""The operator actions' permissions: one list, each permission real, checked per user."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.exceptions import ImproperlyConfigured

from jobs.queue.apps import VIEW_ARGUMENTS
from pipeline_project.audit.actions import ACTIONS, OperatorAction, may, permissions_of, register_actions
from tests.conftest import ALL_DATABASES

pytestmark = ALL_DATABASES


def permission_exists(name: str) -> bool:
    app_label, codename = name.split(".")
    return Permission.objects.filter(content_type__app_label=app_label, codename=codename).exists()


def test_every_action_names_a_permission_that_exists():
    missing = [action.permission for action in ACTIONS.values() if not permission_exists(action.permission)]

    assert not missing and permission_exists(VIEW_ARGUMENTS)


def test_a_staff_user_may_do_what_their_permissions_allow_and_nothing_else():
    user = get_user_model().objects.create_user("ops", is_staff=True)
    user.user_permissions.add(
        Permission.objects.get(codename="retry_job"), Permission.objects.get(codename="change_job")
    )
    user = get_user_model().objects.get(pk=user.pk)  # permissions are cached per instance

    allowed = {name for name, ok in permissions_of(user).items() if ok}

    assert allowed == {"job_retry", "run_retry_failed"}  # retrying a run's failed jobs retries jobs
    assert may(user, "job.retry") and not may(user, "job.cancel")


@pytest.mark.parametrize("flags", [{"is_staff": False}, {"is_active": False}])
def test_a_superuser_who_is_not_active_staff_may_do_nothing(flags):
    user = get_user_model().objects.create_superuser("root", password="pw")
    for name, value in {"is_staff": True, **flags}.items():
        setattr(user, name, value)

    assert not any(permissions_of(user).values())


def test_a_superuser_may_do_everything():
    assert all(permissions_of(get_user_model().objects.create_superuser("root", password="pw")).values())


def test_an_unknown_action_fails_loudly():
    user = get_user_model().objects.create_superuser("root", password="pw")

    with pytest.raises(LookupError, match=r"no\.such"):
        may(user, "no.such")


def test_each_app_registers_its_own_actions_and_a_second_definition_of_one_is_refused():
    assert {"job.retry", "schedule.pause", "run.start", "process.repair", "tracking.retry"} <= set(ACTIONS)
    assert {"prepare_job.cancel", "token.revoke"} <= set(ACTIONS)
    register_actions(ACTIONS["job.retry"])  # the same again: harmless

    with pytest.raises(ImproperlyConfigured, match=r"job\.retry"):
        register_actions(OperatorAction("job.retry", "jobs.cancel_job", "job"))
    assert ACTIONS["job.retry"].permission == "jobs.retry_job"
