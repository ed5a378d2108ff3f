"""The namespaces of big_tables.py's seeded processes. The web server it times imports this
module (PROCESSES_HANDLER_MODULES) and declares them: the process API answers 404 for a namespace
nobody declared. The seeding process, with no Django set up, imports only the names."""

from django.apps import apps

NAMESPACES = ["orders", "subscriptions", "payments", "shipments", "invoices"]


def seeded_processor(task_type, args, process):
    return {"response": "ok"}  # never called: timing runs no worker


if apps.models_ready:  # imported by an app's ready(), in the server
    from jobs.processes.namespaces import namespace

    for name in NAMESPACES:
        namespace(name)(seeded_processor)
