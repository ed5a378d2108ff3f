"""A database outage in a process's log: one warning when it begins, one line when it ends."""

import logging

import psycopg

from pipeline_project.db import outages
from pipeline_project.db.outages import Outages

DOWN = psycopg.OperationalError("connection refused")


def test_an_outage_is_logged_once_however_many_failures_and_its_end_once(caplog, monkeypatch):
    caplog.set_level(logging.INFO, logger="pipeline_project.db")
    seen = Outages()
    for during in ("the control loop", "recording results", "the control loop"):
        seen.failed(DOWN, during=during)
    seen.answered()  # within the quiet period: the same episode goes on
    seen.failed(DOWN, during="the control loop")
    monkeypatch.setattr(outages, "OUTAGE_QUIET_SEC", 0)
    seen.answered()
    seen.answered()

    lines = [(record.levelname, record.getMessage(), getattr(record, "during", None)) for record in caplog.records]
    assert lines == [
        ("WARNING", "database unavailable; retrying until it answers", "the control loop"),
        ("INFO", "database available again", None),
    ]
    assert caplog.records[0].error == "connection refused"
    assert caplog.records[1].failures == 4


def test_a_new_outage_after_the_end_is_logged_again(caplog, monkeypatch):
    monkeypatch.setattr(outages, "OUTAGE_QUIET_SEC", 0)
    caplog.set_level(logging.WARNING, logger="pipeline_project.db")
    seen = Outages()
    seen.failed(DOWN, during="a")
    seen.answered()
    seen.failed(DOWN, during="b")

    assert [record.during for record in caplog.records] == ["a", "b"]
