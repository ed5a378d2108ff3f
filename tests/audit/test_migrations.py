"""The groups the migration creates: read-only operators see and press nothing; operators press
every button and see arguments' secrets."""

from django.contrib.auth.models import Group

from jobs.queue.apps import VIEW_ARGUMENTS
from pipeline_project.audit.actions import ACTIONS
from tests.conftest import ALL_DATABASES

pytestmark = ALL_DATABASES


def held(group_name: str) -> set[str]:
    group = Group.objects.get(name=group_name)
    return {f"{p.content_type.app_label}.{p.codename}" for p in group.permissions.select_related("content_type")}


def test_read_only_operators_may_view_every_system_and_nothing_more():
    permissions = held("Read-only operators")

    assert all(name.split(".")[1].startswith("view_") for name in permissions)
    assert {"jobs.view_job", "jobs.view_queue", "processes.view_process", "ingestion.view_ingestionrun"} <= permissions
    assert {"schedules.view_schedule", "tracking.view_pipelinetracking", "audit.view_auditentry"} <= permissions
    assert VIEW_ARGUMENTS not in permissions and not any(name.startswith("core.") for name in permissions)


def test_operators_may_also_perform_every_action_and_view_arguments():
    permissions = held("Operators")

    assert held("Read-only operators") <= permissions
    assert {action.permission for action in ACTIONS.values() if action.object_type != "api token"} <= permissions
    assert VIEW_ARGUMENTS in permissions
    assert "core.change_apitoken" not in permissions  # tokens stay with administrators
