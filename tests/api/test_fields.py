"""Query-string integers: ASCII digits only, and a number beyond the bound is told the bound."""

import pytest
from rest_framework import serializers

from pipeline_project.api.fields import INT64_MAX, QueryIntegerField


def refusal(field: QueryIntegerField, raw) -> list[str]:
    with pytest.raises(serializers.ValidationError) as refused:
        field.run_validation(raw)
    return refused.value.detail


@pytest.mark.parametrize("raw", ["99999999999999999999", "1" * 400, "1000000001"])
def test_a_number_past_the_bound_names_the_bound(raw):
    assert refusal(QueryIntegerField(min_value=0, max_value=10**9), raw) == [
        "Ensure this value is less than or equal to 1000000000."
    ]


def test_without_a_bound_of_its_own_the_bound_is_a_bigints():
    assert refusal(QueryIntegerField(), "99999999999999999999") == [
        f"Ensure this value is less than or equal to {INT64_MAX}."
    ]


@pytest.mark.parametrize("raw", ["²", "١٢", "-1", "1.0", " 1", "", 1])
def test_only_ascii_digits_are_a_number(raw):
    assert refusal(QueryIntegerField(), raw) == ["Must be a whole number in ASCII digits."]


def test_leading_zeros_are_the_number_they_pad():
    assert QueryIntegerField(max_value=10).run_validation("0" * 30 + "7") == 7
