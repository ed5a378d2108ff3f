"""Fetching within a source's limits and its hosts' robots.txt, against a local HTTP server."""

import hashlib
import itertools
import time

import pytest

from ingestion import fetching, politeness
from ingestion.models import RobotsTxt
from tests.conftest import ALL_DATABASES, ALL_DATABASES_COMMITTED
from tests.ingestion.helpers import source_of

pytestmark = ALL_DATABASES
HOSTS = frozenset({"127.0.0.1"})


def fetcher(**rules) -> fetching.Fetcher:
    return fetching.Fetcher(fetching.Rules(**{"hosts": HOSTS, "max_bytes": 10_000_000, **rules}))


def download(url, path, **rules) -> fetching.Fetched:
    with fetcher(**rules) as fetch:
        return fetch.download(url, path)


def page(url, **rules) -> tuple[str, str]:
    with fetcher(**rules) as fetch:
        return fetch.page(url)


def test_a_file_is_streamed_with_its_checksum_and_our_user_agent(site, tmp_path):
    fetched = download(site.url("/docs/text.pdf"), tmp_path / "t.pdf")

    body = site.files["/docs/text.pdf"][1]
    assert (tmp_path / "t.pdf").read_bytes() == body
    assert (fetched.size, fetched.content_type) == (len(body), "application/pdf")
    assert fetched.sha256 == hashlib.sha256(body).hexdigest()
    assert [(r.path, r.user_agent) for r in site.requests] == [
        ("/robots.txt", "pipeline-control-plane/1 (ingestion)"),
        ("/docs/text.pdf", "pipeline-control-plane/1 (ingestion)"),
    ]


def test_a_file_over_the_size_limit_is_refused_and_nothing_is_left(site, tmp_path):
    with pytest.raises(fetching.FetchError, match="larger than 100 bytes"):
        download(site.url("/docs/scan.png"), tmp_path / "s.png", max_bytes=100)
    assert list(tmp_path.iterdir()) == []


def test_redirects_are_followed_checked_and_bounded(site, tmp_path):
    site.redirects["/old.pdf"] = "/docs/text.pdf"
    assert download(site.url("/old.pdf"), tmp_path / "a").url.endswith("text.pdf")

    site.redirects["/away.pdf"] = "http://elsewhere.invalid/x.pdf"
    with pytest.raises(fetching.FetchError, match="not allowed"):
        download(site.url("/away.pdf"), tmp_path / "b")

    site.redirects["/loop"] = "/loop"
    with pytest.raises(fetching.FetchError, match="redirects"):
        page(site.url("/loop"))
    assert len(site.requested("/loop")) == fetching.MAX_REDIRECTS + 1


def test_only_http_urls_on_allowed_hosts():
    with pytest.raises(fetching.FetchError, match="not an http"):
        page("file:///etc/passwd")
    with pytest.raises(fetching.FetchError, match="not allowed"):
        page("http://10.0.0.1/")
    with pytest.raises(fetching.FetchError, match="not a valid URL"):
        page("http://127.0.0.1:99999/")


def test_a_host_that_does_not_answer_is_a_fetch_error():
    with pytest.raises(fetching.FetchError, match=r"robots.txt could not be fetched"):
        page("http://127.0.0.1:9/")
    with pytest.raises(fetching.FetchError, match="ConnectError"):
        page("http://127.0.0.1:9/", obey_robots_txt=False)


ROBOTS = """# Our portal
User-agent: *
Disallow: /

User-agent: pipeline-control-plane
Disallow: /private/
Allow: /private/open.pdf
Crawl-delay: 0.5
"""


def test_robots_txt_is_obeyed_for_our_user_agent_and_read_once_per_host(site, tmp_path, monkeypatch):
    granted = []  # the starts the database granted: a thread may come back from granting one late
    start_when_due = politeness._start_when_due

    def recorded(*args):
        granted.append(start_when_due(*args))
        return granted[-1]

    monkeypatch.setattr(politeness, "_start_when_due", recorded)
    site.files["/robots.txt"] = ("text/plain", ROBOTS.encode())
    site.files["/private/secret.pdf"] = site.files["/private/open.pdf"] = site.files["/docs/text.pdf"]
    source_id = source_of(site).id  # its requests are paced (by the longer Crawl-delay)

    with fetcher(source_id=source_id) as fetch:
        fetch.download(site.url("/docs/text.pdf"), tmp_path / "a")  # "*" disallows it; our group allows it
        with pytest.raises(fetching.FetchError, match=r"disallowed by http://127.0.0.1:\d+/robots.txt"):
            fetch.download(site.url("/private/secret.pdf"), tmp_path / "b")
        fetch.download(site.url("/private/open.pdf"), tmp_path / "c")
    download(site.url("/docs/text.pdf"), tmp_path / "d", source_id=source_id)  # another fetcher reads the stored one

    assert [r.path for r in site.requests] == ["/robots.txt", "/docs/text.pdf", "/private/open.pdf", "/docs/text.pdf"]
    assert len(granted) == 4  # robots.txt's start too
    assert all((later - earlier).total_seconds() >= 0.45 for earlier, later in itertools.pairwise(granted[1:]))


def test_a_source_may_ignore_robots_txt(site, tmp_path):
    site.files["/robots.txt"] = ("text/plain", b"User-agent: *\nDisallow: /\n")
    download(site.url("/docs/text.pdf"), tmp_path / "a", obey_robots_txt=False)
    assert [r.path for r in site.requests] == ["/docs/text.pdf"]


@pytest.mark.parametrize(
    ("answer", "allowed"),
    [(404, True), (410, True), (401, True), (500, False), (503, False)],
)
def test_a_robots_txt_that_cannot_be_read_allows_everything_unless_the_server_fails(site, tmp_path, answer, allowed):
    site.statuses["/robots.txt"] = answer
    if allowed:
        download(site.url("/docs/text.pdf"), tmp_path / "a")
    else:
        with pytest.raises(fetching.FetchError, match=f"robots.txt answered HTTP {answer}"):
            download(site.url("/docs/text.pdf"), tmp_path / "a")
    assert [r.path for r in site.requests] == ["/robots.txt"] + (["/docs/text.pdf"] if allowed else [])


def test_a_robots_txt_redirected_off_the_sources_hosts_is_not_followed(site, tmp_path):
    site.redirects["/robots.txt"] = "http://elsewhere.invalid/robots.txt"
    download(site.url("/docs/text.pdf"), tmp_path / "a")
    assert RobotsTxt.objects.get().status_code == 302


@ALL_DATABASES_COMMITTED  # the cache's expiry is measured by now(), which a test transaction would freeze
def test_an_unreachable_robots_txt_is_asked_again_sooner_than_a_readable_one(site, tmp_path, settings):
    settings.INGESTION_ROBOTS_RETRY_SEC = 0.5
    site.statuses["/robots.txt"] = 503
    with pytest.raises(fetching.FetchError, match="HTTP 503"):
        download(site.url("/docs/text.pdf"), tmp_path / "a")
    with pytest.raises(fetching.FetchError, match="HTTP 503"):
        download(site.url("/docs/text.pdf"), tmp_path / "a")  # from the store
    assert len(site.requested("/robots.txt")) == 1

    time.sleep(0.6)
    del site.statuses["/robots.txt"]
    download(site.url("/docs/text.pdf"), tmp_path / "a")
    assert len(site.requested("/robots.txt")) == 2
    stored = RobotsTxt.objects.get()
    assert stored.status_code == 404 and (stored.expires_at - stored.fetched_at).total_seconds() == 3600
