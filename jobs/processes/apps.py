from django.apps import AppConfig


class ProcessesConfig(AppConfig):
    name = "jobs.processes"
    label = "processes"
    verbose_name = "Processes"

    def ready(self):
        # The web tier needs the namespaces too (their options, and which exist), not only runworker.
        from jobs.processes.namespaces import load_processor_modules
        from pipeline_project.audit.actions import OperatorAction, register_actions

        load_processor_modules()
        register_actions(
            OperatorAction("process.repair", "processes.repair_process", "process"),
            OperatorAction("process.simple_repair", "processes.repair_process", "process"),
        )
