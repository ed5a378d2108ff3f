"""What a page links to, read as a browser reads it: the page decoded by its declared charset,
hrefs cleaned and resolved against ``<base href>`` and the page's URL, anything but http(s)
left out (mailto:, tel:, javascript:, data:), malformed hrefs passed over, and each target
once, by its normalized URL (``ingestion.keys.normalize_url``, the item keys' normalization):
a page that links one file from its menu, its body and its footer, spelled three ways, links
it once.
"""

import codecs
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

from ingestion import keys

MAX_LABEL_CHARS = 500
PRESCAN_BYTES = 4096  # where a <meta charset> is looked for (browsers look at the first 1024)
_META_CHARSET = re.compile(rb"""<meta[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9_:.\-]+)""", re.IGNORECASE)
_BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))
# WHATWG Encoding: these labels mean windows-1252 in a browser (which is a superset of latin-1).
_WINDOWS_1252_LABELS = {"latin1", "latin-1", "iso-8859-1", "iso8859-1", "l1", "ascii", "us-ascii", "cp819"}
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")
_TAB_OR_NEWLINE = re.compile(r"[\t\n\r]")


@dataclass(frozen=True)
class Link:
    url: str  # absolute and normalized
    label: str


def decode_html(body: bytes, header_charset: str | None) -> str:
    """The page's text: a byte-order mark first, then the Content-Type charset, then a
    ``<meta charset>`` / ``http-equiv`` declaration; else UTF-8 if it is, else windows-1252."""
    for bom, encoding in _BOMS:
        if body.startswith(bom):
            return body[len(bom) :].decode(encoding, errors="replace")
    meta = _META_CHARSET.search(body[:PRESCAN_BYTES])
    for label in (header_charset, meta.group(1).decode("ascii") if meta else None):
        if encoding := _codec(label):
            return body.decode(encoding, errors="replace")
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return body.decode("cp1252", errors="replace")


def _codec(label: str | None) -> str | None:
    if not label:
        return None
    label = label.strip().lower()
    if label in _WINDOWS_1252_LABELS:
        return "cp1252"
    try:
        name = codecs.lookup(label).name
    except LookupError:
        return None
    return "utf-8" if name.startswith("utf-16") else name  # a declared UTF-16 without a BOM means UTF-8


def page_links(html: str, page_url: str) -> list[Link]:
    """The page's http(s) links, absolute and normalized, each once, in page order, each with
    its first non-empty label (link text, an image's alt text, or the title attribute)."""
    parser = _Anchors()
    parser.feed(html)
    parser.close()
    base = _resolved(parser.base, page_url) if parser.base is not None else None
    base = base or page_url
    found: dict[str, str] = {}
    resolved: dict[str, str | None] = {}  # pages repeat their hrefs (menus, footers, tables)
    for href, label in parser.anchors:
        url = resolved[href] if href in resolved else resolved.setdefault(href, _resolved(href, base))
        if url is not None and not found.get(url):
            found[url] = label
    return [Link(url, label) for url, label in found.items()]


def _resolved(href: str, base: str) -> str | None:
    """``href`` as a normalized absolute http(s) URL, or None (another scheme, a fragment of
    this page, or nothing a browser could follow)."""
    href = _TAB_OR_NEWLINE.sub("", href.strip("\x00\x01\x02\x03\x04\x05\x06\x07\x08\x0b\x0c\x0e\x0f \t\n\r"))
    scheme = _SCHEME.match(href)
    if not href or href.startswith("#") or (scheme and scheme.group(1).lower() not in ("http", "https")):
        return None
    href = href.replace("\\", "/")  # browsers read a backslash as a slash in http(s) URLs
    try:
        if scheme and href[scheme.end() :].startswith("/") and not urlsplit(href).hostname:
            return None  # "http://", "http:///path": no host (urljoin would borrow the page's)
        url = urljoin(base, href)
        return keys.normalize_url(url) if urlsplit(url).scheme in ("http", "https") else None
    except ValueError:  # a bad port, an unclosed IPv6 bracket, ...
        return None


class _Anchors(HTMLParser):
    """Collects ``<a href>`` and ``<area href>`` with their labels, and the first ``<base href>``."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.base: str | None = None
        self.anchors: list[tuple[str, str]] = []
        self._open: tuple[str, list[str], str] | None = None  # href, text parts, title

    def handle_starttag(self, tag, attrs):
        first = {}
        for name, value in attrs:  # browsers keep an attribute's first occurrence
            first.setdefault(name, value or "")
        href = first.get("href")
        if tag == "base" and self.base is None and href is not None:
            self.base = href
        elif tag == "a":
            self._close()  # an <a> inside an open <a> ends it, as in a browser
            if href is not None:
                self._open = (href, [], first.get("title", ""))
        elif tag == "area" and href is not None:
            self.anchors.append((href, _label([first.get("alt", "")], first.get("title", ""))))
        elif tag == "img" and self._open is not None:
            self._open[1].append(f" {first.get('alt', '')} ")

    def handle_data(self, data):
        if self._open is not None:
            self._open[1].append(data)

    def handle_endtag(self, tag):
        if tag == "a":
            self._close()

    def close(self):
        super().close()
        self._close()

    def _close(self) -> None:
        if self._open is not None:
            href, parts, title = self._open
            self.anchors.append((href, _label(parts, title)))
            self._open = None


def _label(parts: list[str], title: str) -> str:
    text = " ".join("".join(parts).split()) or " ".join(title.split())
    return text[:MAX_LABEL_CHARS]
