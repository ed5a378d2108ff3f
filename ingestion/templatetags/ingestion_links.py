"""Links to what items name: only http(s) URLs become links (an item's document_url comes from
API clients, and a ``javascript:`` URL in an href would run in an operator's browser)."""

from urllib.parse import urlsplit

from django import template

register = template.Library()


@register.filter
def http_url(value: str | None) -> str:
    """``value`` if it is an http(s) URL, else an empty string."""
    if not value:
        return ""
    try:
        scheme = urlsplit(value.strip()).scheme.lower()
    except ValueError:
        return ""
    return value if scheme in ("http", "https") else ""
