"""Fetching within a source's limits, against a local HTTP server."""

import pytest

from ingestion import fetching
from tests.ingestion import site as website


@pytest.fixture
def site():
    with website.serving() as served:
        yield served


HOSTS = {"127.0.0.1"}


def test_a_file_is_streamed_with_its_checksum(site, tmp_path):
    fetched = fetching.fetch_to(site.url("/docs/text.pdf"), tmp_path / "t.pdf", hosts=HOSTS, max_bytes=10_000)

    body = site.files["/docs/text.pdf"][1]
    assert (tmp_path / "t.pdf").read_bytes() == body
    assert (fetched.size, fetched.content_type) == (len(body), "application/pdf")
    assert fetched.sha256 == __import__("hashlib").sha256(body).hexdigest()


def test_a_file_over_the_size_limit_is_refused_and_nothing_is_left(site, tmp_path):
    with pytest.raises(fetching.FetchError, match="larger than 100 bytes"):
        fetching.fetch_to(site.url("/docs/scan.png"), tmp_path / "s.png", hosts=HOSTS, max_bytes=100)
    assert list(tmp_path.iterdir()) == []


def test_redirects_are_followed_checked_and_bounded(site, tmp_path):
    site.redirects["/old.pdf"] = "/docs/text.pdf"
    assert fetching.fetch_to(site.url("/old.pdf"), tmp_path / "a", hosts=HOSTS, max_bytes=10_000).url.endswith(
        "text.pdf"
    )

    site.redirects["/away.pdf"] = "http://elsewhere.invalid/x.pdf"
    with pytest.raises(fetching.FetchError, match="not allowed"):
        fetching.fetch_to(site.url("/away.pdf"), tmp_path / "b", hosts=HOSTS, max_bytes=10_000)

    site.redirects["/loop"] = "/loop"
    with pytest.raises(fetching.FetchError, match="redirects"):
        fetching.fetch_text(site.url("/loop"), hosts=HOSTS, max_bytes=10_000)


def test_only_http_urls_on_allowed_hosts(tmp_path):
    with pytest.raises(fetching.FetchError, match="not an http"):
        fetching.fetch_text("file:///etc/passwd", hosts=HOSTS, max_bytes=10)
    with pytest.raises(fetching.FetchError, match="not allowed"):
        fetching.fetch_text("http://10.0.0.1/", hosts=HOSTS, max_bytes=10)


def test_a_host_that_does_not_answer_is_a_fetch_error():
    with pytest.raises(fetching.FetchError, match="ConnectError"):
        fetching.fetch_text("http://127.0.0.1:9/", hosts=HOSTS, max_bytes=10)


def test_links_are_absolute_unique_and_labelled():
    html = (
        '<a href="/a.pdf">A  <b>doc</b></a><a href="b.png#x">B</a><a href="/a.pdf">again</a><a href="mailto:x@y">m</a>'
    )
    assert fetching.links_of(html, "http://h.example/dir/page.html") == [
        ("http://h.example/a.pdf", "A doc"),
        ("http://h.example/dir/b.png", "B"),
    ]
