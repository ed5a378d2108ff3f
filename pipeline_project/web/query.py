"""Reading a page's query parameters the way a careless link sends them."""


def query_int(value: str | None) -> int | None:
    """A non-negative whole number in ASCII digits that fits a bigint, or None for anything else
    (absent, empty, "-1", "²", a hundred digits): the page then shows its default."""
    return int(value) if value and value.isascii() and value.isdigit() and len(value) < 19 else None
