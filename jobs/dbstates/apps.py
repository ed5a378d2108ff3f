from django.apps import AppConfig


class DbStatesConfig(AppConfig):
    name = "jobs.dbstates"
    label = "dbstates"
    verbose_name = "Database states"

    def ready(self):
        from jobs.dbstates import signals  # noqa: F401  (a deleted job's files follow its row)
        from pipeline_project.audit.actions import OperatorAction, register_actions

        register_actions(OperatorAction("prepare_job.cancel", "dbstates.change_preparejob", "prepare job"))
