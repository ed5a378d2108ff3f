"""Database URLs to settings and back (pipeline_project/db/urls.py), a primary and its standby in one."""

import psycopg
import pytest

from pipeline_project.db.urls import database_settings, database_url, databases_from, pipeline_url_from

TWO_HOSTS = "postgres://app:s%40cret@db1.internal:5432,db2.internal:5433/control?target_session_attrs=read-write"


def test_a_url_naming_a_primary_and_its_standby_keeps_both_and_asks_for_the_one_taking_writes():
    entry = database_settings(TWO_HOSTS)

    assert (entry["HOST"], entry["PORT"], entry["NAME"], entry["USER"]) == (
        "db1.internal,db2.internal",
        "5432,5433",
        "control",
        "app",
    )
    assert entry["PASSWORD"] == "s@cret"
    assert entry["OPTIONS"] == {"target_session_attrs": "read-write"}


def test_one_host_a_socket_directory_and_a_password_given_apart():
    assert database_settings("postgres://postgres@127.0.0.1:5432/me")["HOST"] == "127.0.0.1"
    socket = database_settings("postgresql://postgres@%2Fvar%2Frun%2Fpostgresql/me", password="from-a-file")
    assert (socket["HOST"], socket["PORT"], socket["PASSWORD"]) == ("/var/run/postgresql", "", "from-a-file")
    assert database_settings("postgres://u:given@h/me", password="from-a-file")["PASSWORD"] == "given"


def test_a_malformed_url_is_refused_by_libpqs_own_parser():
    with pytest.raises(psycopg.ProgrammingError):
        database_settings("postgres://u@h/me?no_such_option=1")


def test_a_subprocess_gets_every_host_and_the_target_but_not_the_processs_own_options():
    params = {
        "host": "db1,db2",
        "port": "5432,5433",
        "dbname": "control",
        "user": "app",
        "password": "p@ss",
        "target_session_attrs": "read-write",
        "application_name": "pipeline-web",
    }

    url = database_url(params)

    assert url == "postgres://app:p%40ss@db1:5432,db2:5433/control?target_session_attrs=read-write"
    assert database_settings(url)["HOST"] == "db1,db2"
    assert database_url({"host": "/tmp/s", "port": 5432, "dbname": "x"}) == "postgres://postgres@%2Ftmp%2Fs:5432/x"
    assert database_url({"host": "a,b", "port": 5432, "dbname": "x"}) == "postgres://postgres@a:5432,b:5432/x"


def test_the_pipeline_database_defaults_to_the_same_servers():
    assert pipeline_url_from(TWO_HOSTS) == TWO_HOSTS.replace("/control?", "/control_pipeline?")
    databases = databases_from(TWO_HOSTS, None, password=None)
    assert (databases["pipeline"]["NAME"], databases["pipeline"]["HOST"]) == (
        "control_pipeline",
        "db1.internal,db2.internal",
    )
    apart = databases_from("postgres://u@a/one", "postgres://v@b/two", password="secret")
    assert [(d["USER"], d["HOST"], d["NAME"], d["PASSWORD"]) for d in apart.values()] == [
        ("u", "a", "one", "secret"),
        ("v", "b", "two", "secret"),
    ]
