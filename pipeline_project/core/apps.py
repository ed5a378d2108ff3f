from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "pipeline_project.core"
    label = "core"
    verbose_name = "API access"

    def ready(self):
        from pipeline_project.core import schema  # noqa: F401  (registers the OpenAPI auth extension)
