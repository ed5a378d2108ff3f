from django.apps import AppConfig

# Staff members with this permission see arguments' secret values (settings.SECRET_ARG_KEYS).
VIEW_ARGUMENTS = "jobs.view_job_arguments"


class JobsConfig(AppConfig):
    name = "jobs.queue"
    label = "jobs"  # the app label the tables, migrations and permissions were made under
    verbose_name = "Jobs"

    def ready(self):
        from jobs.queue.handlers import registry
        from jobs.queue.tasks_backend import django_task_handler
        from pipeline_project.audit.actions import OperatorAction, register_actions
        from pipeline_project.web.arguments import viewing_permission_register

        registry.add_resolver(django_task_handler)
        register_actions(
            OperatorAction("job.retry", "jobs.retry_job", "job"),
            OperatorAction("job.cancel", "jobs.cancel_job", "job"),
            OperatorAction("job.delete", "jobs.delete_job", "job"),
            OperatorAction("queue.pause", "jobs.pause_queue", "queue"),
            OperatorAction("queue.resume", "jobs.pause_queue", "queue"),
            OperatorAction("queue.limits", "jobs.limit_queue", "queue"),
        )
        viewing_permission_register(VIEW_ARGUMENTS)
