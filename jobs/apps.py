from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Jobs"

    def ready(self):
        from jobs.handlers import registry
        from jobs.tasks_backend import django_task_handler

        registry.add_resolver(django_task_handler)
