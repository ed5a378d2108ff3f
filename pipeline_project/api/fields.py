"""Serializer fields that take JSON types at face value.

DRF's fields coerce ("1" becomes 1, 1 becomes "1"); a daemon that sends the wrong type
has a bug worth hearing about, so request bodies use these instead.
"""

import re
import unicodedata

from rest_framework import serializers

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


class StrictIntegerField(serializers.IntegerField):
    default_error_messages = {"invalid": "Must be a JSON integer."}

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class QueryIntegerField(serializers.IntegerField):
    """An integer in a query string or header: ASCII digits only (``int()`` also takes ``²`` and ``١٢``)."""

    default_error_messages = {"invalid": "Must be a whole number in ASCII digits."}
    _DIGITS = re.compile(r"[0-9]+")

    def to_internal_value(self, data):
        if not isinstance(data, str) or not self._DIGITS.fullmatch(data):
            self.fail("invalid")
        if len(data.lstrip("0")) > 19:  # beyond any bound: said so without parsing a huge number
            self.fail("max_value", max_value=INT64_MAX if self.max_value is None else self.max_value)
        return super().to_internal_value(data)


class StrictCharField(serializers.CharField):
    default_error_messages = {"invalid": "Must be a JSON string."}

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    default_error_messages = {"invalid": "Must be a JSON boolean."}

    def to_internal_value(self, data):
        if not isinstance(data, bool):
            self.fail("invalid")
        return data


def contains_control_characters(value: str) -> bool:
    return any(unicodedata.category(char) == "Cc" for char in value)
