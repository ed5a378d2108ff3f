from django.apps import AppConfig


class ProcessesConfig(AppConfig):
    name = "jobs.processes"
    label = "processes"
    verbose_name = "Processes"
