from django.core.management.base import BaseCommand
from django.db import connections

from pipeline_project.db.connections import connection_params, ensure_databases


class Command(BaseCommand):
    help = "Create the default and pipeline databases on their server if they do not exist yet."

    def handle(self, *args, **options):
        for alias in connections:
            params = connection_params(alias)
            name = params.pop("dbname")
            ensure_databases(params=params, names=(name,))
            self.stdout.write(f"{alias}: database {name!r} is present")
