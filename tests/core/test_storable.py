"""What PostgreSQL can store, checked before a statement carries it."""

import pytest

from pipeline_project.core.storable import MAX_JSON_DEPTH, json_problem, storable_text, text_problem


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
