"""The identity of an ingestion item (seed 004, section 5.4): ``item_key``, by these rules in
this order, and never changed once an item exists:

- discovery URL item (``source_url``): ``source_url:{source_url_id}``, else ``source_url_url:{sha256(url)}``
- document item (``document``): ``document:{document_id}``, else ``document_url:{sha256(url)}``
- OCR item (``ocr_job``): ``ocr_job:{document_id}``, else ``ocr_job_url:{sha256(url)}``

where ``sha256`` is the hex digest of the URL normalized by :func:`normalize_url`:

- scheme and host lower-cased; an internationalized host in punycode; trailing dots of the host dropped;
- the default port (80 for http, 443 for https) dropped;
- an empty path becomes ``/``; ``.`` and ``..`` segments resolved;
- percent-encoding normalized: escapes of unreserved characters decoded, other escapes in upper
  case, characters that must be escaped (spaces, non-ASCII) escaped as UTF-8;
- the query kept as it is (order and every parameter), with the same escaping rules;
- the fragment dropped; user information kept.
"""

import hashlib
import re
from contextlib import suppress
from urllib.parse import quote, urlsplit, urlunsplit

KEY_RULES = {
    # item_type: (the id it is keyed by, prefix with the id, prefix with the URL's digest)
    "source_url": ("source_url_id", "source_url", "source_url_url"),
    "document": ("document_id", "document", "document_url"),
    "ocr_job": ("document_id", "ocr_job", "ocr_job_url"),
}
DEFAULT_PORTS = {"http": 80, "https": 443}
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
# Characters left as they are in a path or query (reserved ones keep their meaning there).
_PATH_SAFE = "/:@!$&'()*+,;=-._~"
_QUERY_SAFE = _PATH_SAFE + "?"


def item_key(*, item_type: str, source_url_id=None, document_id=None, url: str | None = None) -> str:
    if item_type not in KEY_RULES:
        raise ValueError(f"unknown item_type {item_type!r}: one of {', '.join(KEY_RULES)}")
    id_name, id_prefix, url_prefix = KEY_RULES[item_type]
    identifier = {"source_url_id": source_url_id, "document_id": document_id}[id_name]
    identifier = str(identifier).strip() if identifier is not None else ""
    if identifier:
        return f"{id_prefix}:{identifier}"
    if not url:
        raise ValueError(f"a {item_type} item needs {id_name} or a URL")
    return f"{url_prefix}:{hashlib.sha256(normalize_url(url).encode()).hexdigest()}"


def normalize_url(url: str) -> str:
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        raise ValueError(f"not an absolute http(s) URL: {url!r}")
    host = parts.hostname.rstrip(".")  # urlsplit lower-cases it
    with suppress(UnicodeError):  # not a valid IDN: kept lower-cased
        host = host.encode("idna").decode("ascii")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"bad port in {url!r}") from None
    netloc = host if port in (None, DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    if parts.username is not None or parts.password is not None:
        netloc = parts.netloc.rpartition("@")[0] + "@" + netloc
    path = _without_dot_segments(_escaped(parts.path, _PATH_SAFE) or "/")
    return urlunsplit((scheme, netloc, path, _escaped(parts.query, _QUERY_SAFE), ""))


def _without_dot_segments(path: str) -> str:
    """RFC 3986's remove_dot_segments for an absolute path (other slashes are left alone)."""
    segments = path.split("/")
    kept: list[str] = []
    for segment in segments:
        if segment == "..":
            if len(kept) > 1:
                kept.pop()
        elif segment != ".":
            kept.append(segment)
    if segments[-1] in (".", ".."):
        kept.append("")  # "/a/b/.." is the directory "/a/"
    return "/".join(kept) or "/"


def _escaped(text: str, safe: str) -> str:
    """Percent-escapes in one form: unreserved characters decoded, the rest upper-case, and
    characters that need escaping escaped (UTF-8)."""

    def decode_unreserved(match: re.Match) -> str:
        char = chr(int(match.group(1), 16))
        return char if char in _UNRESERVED else "%" + match.group(1).upper()

    text = _ESCAPE.sub(decode_unreserved, text)
    # Escape what is not already an escape; "%" of an escape stays.
    return "".join(
        piece if _ESCAPE.fullmatch(piece) else quote(piece, safe=safe)
        for piece in re.split(r"(%[0-9A-F]{2})", text)
        if piece
    )


__all__ = ["item_key", "normalize_url"]
