"""Write ``engine.json``, the file a sqlrs CLI finds the engine by (endpoint, pid, token, ...)."""

import os
from pathlib import Path

from django.core.management.base import BaseCommand

from jobs.dbstates.engine.identity import engine_json_write


class Command(BaseCommand):
    help = "Write engine.json for a sqlrs CLI: the engine's endpoint, pid, a new API token, version and id."

    def add_arguments(self, parser):
        parser.add_argument("path", type=Path, help="Where to write it (for example var/engine.json).")
        parser.add_argument(
            "--endpoint",
            default=f"http://{os.environ.get('WEB_BIND', '127.0.0.1:8000')}/sqlrs",
            help="The engine's base URL (the one /v1/health is under).",
        )
        parser.add_argument("--pid", type=int, default=None, help="The engine's process id (default: the parent's).")

    def handle(self, *args, path, endpoint, pid, **options):
        document = engine_json_write(path=path, endpoint=endpoint, pid=pid or os.getppid())
        self.stdout.write(f"wrote {path} (endpoint {document['endpoint']}, instance {document['instanceId']})")
