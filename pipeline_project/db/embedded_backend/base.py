"""The project's PostgreSQL backend, pointed at the embedded server, which starts on first use."""

from django.db.backends.postgresql import client

from pipeline_project.db import embedded as embedded_postgres
from pipeline_project.db.postgresql import base


class DatabaseClient(client.DatabaseClient):
    def runshell(self, parameters):
        self.connection.settings_dict["HOST"] = embedded_postgres.start()
        super().runshell(parameters)


class DatabaseWrapper(base.DatabaseWrapper):
    client_class = DatabaseClient

    def get_connection_params(self):
        self.settings_dict["HOST"] = embedded_postgres.start()
        return super().get_connection_params()
