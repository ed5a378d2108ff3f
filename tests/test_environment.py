"""Settings read from the environment: a secret is a value or the file its *_FILE names."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from pipeline_project.environment import env_secret


def test_a_secret_is_read_from_the_file_its_file_variable_names_before_the_value(tmp_path, monkeypatch):
    (tmp_path / "secret").write_text("from-the-file\n")
    monkeypatch.setenv("SOME_SECRET", "from-the-variable")
    monkeypatch.setenv("SOME_SECRET_FILE", str(tmp_path / "secret"))

    assert env_secret("SOME_SECRET") == "from-the-file"  # a mounted Secret's trailing newline dropped


def test_a_secret_without_a_file_is_the_variable_or_the_default(monkeypatch):
    monkeypatch.delenv("SOME_SECRET_FILE", raising=False)
    monkeypatch.delenv("SOME_SECRET", raising=False)
    assert env_secret("SOME_SECRET", "fallback") == "fallback"
    monkeypatch.setenv("SOME_SECRET", "value")
    assert env_secret("SOME_SECRET") == "value"


def test_a_secret_file_that_cannot_be_read_is_a_configuration_error_naming_it(tmp_path, monkeypatch):
    monkeypatch.setenv("SOME_SECRET_FILE", str(tmp_path / "missing"))

    with pytest.raises(ImproperlyConfigured, match=r"SOME_SECRET_FILE=.*missing"):
        env_secret("SOME_SECRET")
