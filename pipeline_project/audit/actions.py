"""What operators may do, each action by name with the permission it needs: one list that the
admin, the /pipeline pages and the API check, that hides the buttons a user may not press,
and that names the audit trail's rows."""

from dataclasses import dataclass


@dataclass(frozen=True)
class OperatorAction:
    name: str  # as the audit trail records it and the views declare it (``operator_action``)
    permission: str  # "app_label.codename"
    object_type: str  # what the action's objects are


ACTIONS = {
    action.name: action
    for action in (
        OperatorAction("job.retry", "jobs.retry_job", "job"),
        OperatorAction("job.cancel", "jobs.cancel_job", "job"),
        OperatorAction("job.delete", "jobs.delete_job", "job"),
        OperatorAction("queue.pause", "jobs.pause_queue", "queue"),
        OperatorAction("queue.resume", "jobs.pause_queue", "queue"),
        OperatorAction("queue.limits", "jobs.limit_queue", "queue"),
        OperatorAction("schedule.pause", "schedules.change_schedule", "schedule"),
        OperatorAction("schedule.resume", "schedules.change_schedule", "schedule"),
        OperatorAction("schedule.run_now", "schedules.run_schedule", "schedule"),
        OperatorAction("run.start", "ingestion.add_ingestionrun", "source"),
        OperatorAction("run.cancel", "ingestion.cancel_ingestionrun", "run"),
        OperatorAction("run.retry_failed", "jobs.retry_job", "run"),
        OperatorAction("process.repair", "processes.repair_process", "process"),
        OperatorAction("process.simple_repair", "processes.repair_process", "process"),
        OperatorAction("tracking.retry", "tracking.change_pipelinetracking", "tracking row"),
        OperatorAction("prepare_job.cancel", "dbstates.change_preparejob", "prepare job"),
        OperatorAction("token.revoke", "core.change_apitoken", "api token"),
    )
}

# Arguments' secret values (settings.SECRET_ARG_KEYS) are shown to users with this permission.
VIEW_ARGUMENTS = "jobs.view_job_arguments"


def may(user, action: str) -> bool:
    """Whether a (staff) user may perform the operator action named ``action``."""
    return bool(user and user.is_active and user.is_staff and user.has_perm(ACTIONS[action].permission))


def permissions_of(user) -> dict[str, bool]:
    """Every action's name with whether the user may perform it, for templates: ``can.job_retry``."""
    return {name.replace(".", "_"): may(user, name) for name in ACTIONS}
