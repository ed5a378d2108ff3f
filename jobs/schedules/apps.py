from django.apps import AppConfig


class SchedulesConfig(AppConfig):
    name = "jobs.schedules"
    label = "schedules"
    verbose_name = "Schedules"

    def ready(self):
        from pipeline_project.audit.actions import OperatorAction, register_actions

        register_actions(
            OperatorAction("schedule.pause", "schedules.change_schedule", "schedule"),
            OperatorAction("schedule.resume", "schedules.change_schedule", "schedule"),
            OperatorAction("schedule.run_now", "schedules.run_schedule", "schedule"),
        )
