"""The API's one JSON encoding, DRF's renderer's (compact, UTF-8; its encoder's dates, UUIDs and
decimals), for the answers built outside DRF's views too: the middleware's errors, /health, the
sqlrs engine's lists, NDJSON lines. One client parser sees one spelling everywhere."""

from django.http import HttpResponse
from rest_framework.renderers import JSONRenderer

_RENDERER = JSONRenderer()
JSON = "application/json"


def json_text(value) -> str:
    """``value`` as the API writes JSON (``None`` as ``null``: DRF renders it as nothing)."""
    return "null" if value is None else _RENDERER.render(value).decode()


class JSONAnswer(HttpResponse):
    """An HttpResponse of ``value`` in the API's JSON (Django's JsonResponse writes ``", "`` and ``": "``)."""

    def __init__(self, value, **kwargs):
        kwargs.setdefault("content_type", JSON)
        super().__init__(json_text(value), **kwargs)
