"""A JSON parser that refuses what PostgreSQL cannot store, before any view sees it."""

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from pipeline_project.db.storable import MAX_JSON_DEPTH, json_problem


class StrictJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(f"JSON is nested deeper than {MAX_JSON_DEPTH} levels.") from None
        if problem := json_problem(data):
            raise ParseError(f"The JSON body {problem}.")
        return data
