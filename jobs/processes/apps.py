from django.apps import AppConfig


class ProcessesConfig(AppConfig):
    name = "jobs.processes"
    label = "processes"
    verbose_name = "Processes"

    def ready(self):
        # The web tier needs the namespaces too (their options, and which exist), not only runworker.
        from jobs.processes.namespaces import load_processor_modules

        load_processor_modules()
