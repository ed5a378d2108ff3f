"""Reading a page's links as a browser does, from the pages real sites serve (tests/ingestion/pages)."""

import time

import pytest

from ingestion.links import Link, decode_html, page_links
from tests.ingestion import site as website

ORIGIN = "http://localhost:8765"


def urls(links: list[Link]) -> list[str]:
    return [link.url.removeprefix(ORIGIN) for link in links]


def test_one_document_spelled_many_ways_is_one_link_with_its_first_label():
    found = page_links(website.page("ministry.html", port=8765), f"{ORIGIN}/publications.html")

    labels = {link.url.removeprefix(ORIGIN): link.label for link in found}
    documents = [url for url in urls(found) if url.startswith("/docs/") and not url.endswith((".html", "/"))]
    assert documents == [
        "/docs/annual-report.pdf",  # nav, body (LocalHost, #page=2), footer (HTTP://LOCALHOST, %2D)
        "/docs/budget-2024.pdf",  # relative with %2d, and with a trailing ?
        "/docs/road-map.png",  # ./docs/../docs/
        "/docs/r%C3%A9sum%C3%A9.pdf",  # lower-case escapes, and raw UTF-8
        "/docs/Annual-Report.pdf",  # paths are case-sensitive: another file
    ]
    assert labels["/docs/annual-report.pdf"] == "Annual report 2024"
    assert labels["/docs/road-map.png"] == "Road map of the region"  # an image link's alt text
    assert labels["/docs/r%C3%A9sum%C3%A9.pdf"] == "Résumé of the minister"
    assert labels["/contact/"] == "Contact"
    # Pages beside the documents: kept as links, never taken for documents by the pipeline.
    assert {"/", "/about.html", "/news/?page=1", "/docs/report.pdf.html", "/download?file=old.pdf"} <= set(labels)
    assert not any(url.startswith(("mailto", "tel", "#")) or "#" in url for url in urls(found))
    assert "/static/site.css" not in labels and "/static/menu.js" not in labels  # <link>, <script>: not links


def test_default_ports_host_case_and_a_trailing_dot_are_one_host():
    html = """<a href="http://Example.org:80/a.pdf">a</a> <a href="http://example.org./a.pdf">b</a>
              <a href="https://EXAMPLE.org:443/a.pdf">c</a> <a href="https://example.org/a.pdf#x">d</a>"""
    assert [link.url for link in page_links(html, "http://example.org/")] == [
        "http://example.org/a.pdf",
        "https://example.org/a.pdf",
    ]


def test_the_first_base_href_resolves_relative_links():
    found = page_links(website.page("base_href.html", port=8765), f"{ORIGIN}/archive/index.html")

    assert urls(found) == [
        "/archive/2024/report.pdf",
        "/archive/2023/report.pdf",
        "/docs/annex.pdf",
        "/archive/2024/scan.png",
        "/archive/2024/?sort=date",
    ]


def test_a_base_href_that_is_not_http_is_passed_over():
    html = '<base href="javascript:alert(1)"><a href="a.pdf">a</a>'
    assert [link.url for link in page_links(html, "http://h.example/dir/page.html")] == ["http://h.example/dir/a.pdf"]


def test_other_schemes_fragments_and_malformed_hrefs_are_passed_over_and_the_rest_cleaned_as_browsers_do():
    found = page_links(website.page("odd_links.html"), f"{ORIGIN}/contacts.html")

    assert urls(found) == [
        "/docs/padded.pdf",
        "/docs/split.pdf",
        "/docs/backslashes.pdf",
        "/docs/get.pdf?id=1&lang=en",
        "/docs/first.pdf",
        "/docs/second.pdf",
        "/docs/space%20name.pdf",
        "/docs/titled.pdf",
    ]
    labels = {link.url.removeprefix(ORIGIN): link.label for link in found}
    assert labels["/docs/first.pdf"] == "First" and labels["/docs/titled.pdf"] == "Titled document"


CYRILLIC_META = '<meta http-equiv="Content-Type" content="text/html; charset=windows-1251">'
LATIN_META = '<meta charset="latin1">'


@pytest.mark.parametrize(
    ("name", "meta", "encoding", "header_charset"),
    [
        ("cyrillic.html", "", "windows-1251", "windows-1251"),
        ("cyrillic.html", CYRILLIC_META, "windows-1251", None),
        ("latin.html", "", "cp1252", "ISO-8859-1"),  # browsers read latin-1 as windows-1252 (its em dash)
        ("latin.html", LATIN_META, "cp1252", None),
        ("cyrillic.html", '<meta charset="utf-8">', "windows-1251", "windows-1251"),  # the header wins
        ("cyrillic.html", "", "utf-8", None),  # nothing declared: UTF-8, as it is
    ],
)
def test_pages_are_decoded_by_the_charset_of_their_header_or_meta_tag(name, meta, encoding, header_charset):
    body = website.page(name, meta=meta).encode(encoding)
    found = page_links(decode_html(body, header_charset), f"{ORIGIN}/page.html")

    labels = {link.url.removeprefix(ORIGIN): link.label for link in found}
    if name == "cyrillic.html":
        assert labels == {
            "/docs/%D0%BE%D1%82%D1%87%D1%91%D1%82-2024.pdf": "Годовой отчёт за 2024 год",
            "/docs/budget.pdf": "Бюджет на 2025 год",
            "/novosti.html": "Новости",
        }
    else:
        assert labels == {
            "/docs/arr%C3%AAt%C3%A9-pr%C3%A9fectoral.pdf": "arrêtés préfectoraux",
            "/docs/r%C3%A9sum%C3%A9.pdf": "résumé des décisions (Größe: 80 kB — ½ page)",
        }


def test_undeclared_bytes_that_are_not_utf8_are_read_as_windows_1252_and_a_bom_wins():
    assert decode_html("<p>café — ½</p>".encode("cp1252"), None) == "<p>café — ½</p>"
    assert decode_html(b"\xef\xbb\xbf<p>\xc3\xa9</p>", "windows-1251") == "<p>é</p>"
    assert decode_html("<p>é</p>".encode("utf-16-le"), "x-unknown-charset") != "<p>é</p>"  # no BOM: not guessed
    assert decode_html(b"<p>\xe9</p>", "no-such-charset") == "<p>é</p>"  # unknown label: sniffed


def test_a_very_long_page_is_read_in_reasonable_time():
    rows = "".join(
        f'<tr><td><a href="/news/{n}.html">News {n}</a></td><td><a href="{spelling}">Report {n % 200}</a></td></tr>\n'
        for n in range(40_000)
        for spelling in [
            (f"/docs/r{n % 200}.pdf", f"{ORIGIN.upper()}/docs/r{n % 200}.pdf#p", f"docs/r{n % 200}.pdf?")[n % 3]
        ]
    )
    html = f"<html><body><table>{rows}</table></body></html>"
    assert len(html) > 4_000_000

    started = time.perf_counter()
    found = page_links(html, f"{ORIGIN}/")
    elapsed = time.perf_counter() - started

    documents = [url for url in urls(found) if url.endswith(".pdf")]
    assert documents == [f"/docs/r{n}.pdf" for n in range(200)]
    assert len(found) == 40_000 + 200
    assert elapsed < 20, f"{elapsed:.1f} s for {len(html) / 1e6:.1f} MB"
