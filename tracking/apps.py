from django.apps import AppConfig


class TrackingConfig(AppConfig):
    name = "tracking"
    verbose_name = "Pipeline tracking"

    def ready(self):
        from pipeline_project.audit.actions import OperatorAction, register_actions

        register_actions(OperatorAction("tracking.retry", "tracking.change_pipelinetracking", "tracking row"))
