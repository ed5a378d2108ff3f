"""What PostgreSQL can store, checked before a statement carries it."""

import pytest

from pipeline_project.db.storable import (
    MAX_ERROR_CHARS,
    MAX_JSON_DEPTH,
    MAX_TRACEBACK_CHARS,
    exception_details,
    exception_text,
    failure_text,
    json_problem,
    storable_text,
    text_problem,
)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({"a": [1, 2.5, None, True, "x"]}, None),
        ({"ratio": float("nan")}, "contains nan, which JSON cannot represent"),
        ([float("-inf")], "contains -inf, which JSON cannot represent"),
        ({"text": "a\x00b"}, "contains a NUL (\\u0000) character"),
        ({"key\x00": 1}, "contains a NUL (\\u0000) character"),
        ({"text": "lone \udc00"}, "contains a lone surrogate"),
        ({1: "int key"}, "has a non-string key 1"),
        ({"when": object()}, "contains a object, which is not JSON"),
        ({"set": {1, 2}}, "contains a set, which is not JSON"),
    ],
)
def test_json_problem(value, problem):
    assert json_problem(value) == problem


def test_deep_nesting_is_refused_without_recursing_forever():
    value: list = []
    for _ in range(MAX_JSON_DEPTH + 5):
        value = [value]

    assert json_problem(value) == f"is nested deeper than {MAX_JSON_DEPTH} levels"


def test_text_that_cannot_be_stored_is_named_and_can_be_made_storable():
    hostile = "nul \x00 and \ud800 surrogate"

    assert text_problem(hostile) == "contains a NUL (\\u0000) character"
    assert text_problem(storable_text(hostile)) is None
    assert storable_text(hostile) == "nul \ufffd and ? surrogate"


def test_the_text_of_a_failure_is_masked_storable_and_bounded():
    text = "cannot reach postgres://app:hunter2@db/x with api_key=abc123 \x00 and \udc00 " + "y" * 5000

    stored = failure_text(text)
    assert stored.startswith("cannot reach postgres://app:***@db/x with api_key=*** \ufffd and ? ")
    assert len(stored) == MAX_ERROR_CHARS and text_problem(stored) is None
    assert failure_text("head " + "x" * 100 + " tail", limit=10, tail=True) == "xxxxx tail"


class _Hostile(Exception):
    def __str__(self):
        raise RuntimeError("no message for you")


def test_an_exception_is_told_as_every_failure_is():
    try:
        raise ConnectionError("password=hunter2 \x00 \ud800")
    except ConnectionError as exc:
        assert exception_text(exc) == "ConnectionError: password=*** \ufffd ?"
        details = exception_details(exc)
    assert details["exception_class"] == "builtins.ConnectionError"
    assert "Traceback" in details["traceback"] and "hunter2" not in details["traceback"]
    assert text_problem(details["traceback"]) is None
    assert exception_text(_Hostile()) == "_Hostile: <_Hostile whose message cannot be read>"
    long = ValueError("x" * (MAX_TRACEBACK_CHARS * 2))
    assert len(exception_details(long)["traceback"]) <= MAX_TRACEBACK_CHARS  # its end: where it failed
