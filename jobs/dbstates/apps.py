from django.apps import AppConfig


class DbStatesConfig(AppConfig):
    name = "jobs.dbstates"
    label = "dbstates"
    verbose_name = "Database states"
