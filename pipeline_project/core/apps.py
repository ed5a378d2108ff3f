from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "pipeline_project.core"
    label = "core"
    verbose_name = "API access"

    def ready(self):
        from pipeline_project.api import schema  # noqa: F401  (register a check, the OpenAPI auth extension)
        from pipeline_project.audit.actions import OperatorAction, register_actions

        register_actions(OperatorAction("token.revoke", "core.change_apitoken", "api token"))
