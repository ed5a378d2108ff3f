from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "pipeline_project.audit"
    label = "audit"
    verbose_name = "Operators and their actions"
