from django.apps import AppConfig


class IngestionConfig(AppConfig):
    name = "ingestion"

    def ready(self):
        from pipeline_project.audit.actions import OperatorAction, register_actions

        register_actions(
            OperatorAction("run.start", "ingestion.add_ingestionrun", "run"),  # names the run started
            OperatorAction("run.cancel", "ingestion.cancel_ingestionrun", "run"),
            OperatorAction("run.retry_failed", "jobs.retry_job", "run"),  # retrying a run's failed jobs retries jobs
        )
