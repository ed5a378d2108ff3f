"""The ASGI application the web server runs (see gunicorn_conf.py)."""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pipeline_project.settings")
django.setup(set_prefix=False)

from pipeline_project.process_memory import startup_objects_freeze  # noqa: E402 - imports need Django set up
from pipeline_project.web.handler import ProjectASGIHandler  # noqa: E402

application = ProjectASGIHandler()
startup_objects_freeze(templates=True)  # each gunicorn worker imports this module itself (no preload)
