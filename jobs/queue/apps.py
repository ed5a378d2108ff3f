from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs.queue"
    label = "jobs"  # the app label the tables, migrations and permissions were made under
    verbose_name = "Jobs"

    def ready(self):
        from jobs.queue.handlers import registry
        from jobs.queue.tasks_backend import django_task_handler

        registry.add_resolver(django_task_handler)
