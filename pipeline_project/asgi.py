"""The ASGI application the web server runs (see gunicorn_conf.py)."""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pipeline_project.settings")
django.setup(set_prefix=False)

from pipeline_project.web.handler import ProjectASGIHandler  # noqa: E402 - Django must be set up before it is imported

application = ProjectASGIHandler()
