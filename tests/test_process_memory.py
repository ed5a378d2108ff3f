"""What the long-running processes make as they start is frozen, out of the collector's full passes."""

import json
import subprocess
import sys

from django.conf import settings

# Run in a process of its own: freezing is for the life of the process that does it.
WEB_WORKER = """
import gc, json
import pipeline_project.asgi  # what each gunicorn worker imports (no preload)
from django.template import engines
from django.template.loaders.cached import Loader
cached = [loader for loader in engines["django"].engine.template_loaders if isinstance(loader, Loader)]
print(json.dumps({
    "frozen": gc.get_freeze_count(),
    "tracked": len(gc.get_objects()),
    "dashboard_compiled": any("admin/jobs/dashboard.html" in key for c in cached for key in c.get_template_cache),
}))
"""


def test_the_web_workers_startup_objects_are_frozen_before_any_request():
    answer = subprocess.run(
        [sys.executable, "-c", WEB_WORKER], capture_output=True, text=True, check=True, cwd=settings.BASE_DIR
    )
    figures = json.loads(answer.stdout.splitlines()[-1])
    # Views and templates are loaded before the freeze, so the first request adds little to walk.
    assert figures["dashboard_compiled"]
    assert figures["frozen"] > 100_000
    assert figures["tracked"] < figures["frozen"] / 20
