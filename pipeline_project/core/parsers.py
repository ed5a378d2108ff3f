"""A JSON parser that refuses what PostgreSQL cannot store, before any view sees it."""

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

MAX_DEPTH = 64


def _reject_unstorable(value, depth: int = 0) -> None:
    """NUL characters and lone surrogates are valid JSON but invalid in PostgreSQL text/jsonb."""
    if depth > MAX_DEPTH:
        raise ParseError(f"JSON is nested deeper than {MAX_DEPTH} levels.")
    if isinstance(value, str):
        if "\x00" in value:
            raise ParseError("JSON strings must not contain NUL (\\u0000) characters.")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ParseError("JSON strings must not contain lone surrogate escapes.") from None
    elif isinstance(value, dict):
        for key, item in value.items():
            _reject_unstorable(key, depth + 1)
            _reject_unstorable(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _reject_unstorable(item, depth + 1)


class StrictJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(f"JSON is nested deeper than {MAX_DEPTH} levels.") from None
        _reject_unstorable(data)
        return data
