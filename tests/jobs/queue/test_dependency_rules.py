"""jobs.queue.dependency_rules: the database runs the functions whose text the code holds."""

from django.db import connection

from jobs.queue.dependency_rules import FUNCTIONS
from tests.conftest import ALL_DATABASES

pytestmark = ALL_DATABASES


def test_the_databases_dependency_functions_are_the_codes():
    settle_body, react_body = FUNCTIONS.split("$$")[1::2]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT proname, prosrc FROM pg_proc "
            "WHERE proname IN ('dl_job_dependencies_settle', 'dl_job_dependencies_react')"
        )
        installed = dict(cursor.fetchall())
    assert installed == {"dl_job_dependencies_settle": settle_body, "dl_job_dependencies_react": react_body}
