import pytest

from pipeline_project.web.query import query_int


@pytest.mark.parametrize("value", [None, "", "-1", "1.5", " 7", "²", "٣", "1e3", "9" * 19, "9" * 5000])
def test_anything_but_a_whole_number_that_fits_a_bigint_reads_as_none(value):
    assert query_int(value) is None


@pytest.mark.parametrize(("value", "number"), [("0", 0), ("42", 42), ("007", 7), ("9" * 18, int("9" * 18))])
def test_ascii_digits_read_as_their_number(value, number):
    assert query_int(value) == number
