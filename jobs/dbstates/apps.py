from django.apps import AppConfig


class DbStatesConfig(AppConfig):
    name = "jobs.dbstates"
    label = "dbstates"
    verbose_name = "Database states"

    def ready(self):
        from jobs.dbstates import signals  # noqa: F401  (a deleted job's files follow its row)
