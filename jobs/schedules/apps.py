from django.apps import AppConfig


class SchedulesConfig(AppConfig):
    name = "jobs.schedules"
    label = "schedules"
    verbose_name = "Schedules"
