from django.apps import AppConfig


class DemoConfig(AppConfig):
    """``manage.py demo``: a living example of every system, made and taken away as one."""

    name = "pipeline_project.demo"
    label = "demo"
    verbose_name = "Demo"
