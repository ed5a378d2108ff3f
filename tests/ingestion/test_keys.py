import hashlib

import pytest

from ingestion.keys import item_key, normalize_url


def digest(url: str) -> str:
    return hashlib.sha256(url.encode()).hexdigest()


@pytest.mark.parametrize(
    ("item_type", "ids", "expected"),
    [
        ("source_url", {"source_url_id": 12}, "source_url:12"),
        ("source_url", {"source_url_id": " 12 ", "document_id": 5}, "source_url:12"),
        ("document", {"document_id": "d-7", "source_url_id": 12}, "document:d-7"),
        ("ocr_job", {"document_id": 7}, "ocr_job:7"),
    ],
)
def test_an_item_with_its_id_is_keyed_by_it(item_type, ids, expected):
    assert item_key(item_type=item_type, url="http://example.com/x", **ids) == expected


@pytest.mark.parametrize(
    ("item_type", "prefix"),
    [("source_url", "source_url_url"), ("document", "document_url"), ("ocr_job", "ocr_job_url")],
)
def test_without_its_id_an_item_is_keyed_by_the_digest_of_its_normalized_url(item_type, prefix):
    key = item_key(item_type=item_type, document_id="" if item_type != "source_url" else None, url="HTTP://A.example/x")
    assert key == f"{prefix}:{digest('http://a.example/x')}"


@pytest.mark.parametrize(
    ("url", "normalized"),
    [
        ("HTTP://Example.COM/a", "http://example.com/a"),  # scheme and host lower-cased
        ("http://example.com./a", "http://example.com/a"),  # trailing dot of the host
        ("http://example.com:80/a", "http://example.com/a"),  # default ports
        ("https://example.com:443/a", "https://example.com/a"),
        ("http://example.com:8080/a", "http://example.com:8080/a"),
        ("http://example.com", "http://example.com/"),  # empty path
        ("http://example.com/a/./b/../c", "http://example.com/a/c"),  # dot segments
        ("http://example.com/a/b/..", "http://example.com/a/"),
        ("http://example.com/../x", "http://example.com/x"),
        ("http://example.com/%7euser/%2f", "http://example.com/~user/%2F"),  # escapes
        ("http://example.com/a b/č", "http://example.com/a%20b/%C4%8D"),  # must-escape characters
        ("http://example.com/?b=2&a=%7E&c", "http://example.com/?b=2&a=~&c"),  # query kept, in order
        ("http://example.com/a#part", "http://example.com/a"),  # fragment
        ("http://user:pw@example.com/a", "http://user:pw@example.com/a"),  # user information kept
        ("http://bücher.de/a", "http://xn--bcher-kva.de/a"),  # internationalized host
    ],
)
def test_normalization(url, normalized):
    assert normalize_url(url) == normalized


def test_equivalent_urls_share_a_key_and_different_ones_do_not():
    same = {
        item_key(item_type="document", url=u) for u in ("http://A.com:80/x#1", "http://a.com/./x", "http://a.com/x")
    }
    assert len(same) == 1
    assert item_key(item_type="document", url="http://a.com/x?p=1") not in same


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"item_type": "page", "url": "http://a.com/"}, "unknown item_type"),
        ({"item_type": "document"}, "needs document_id or a URL"),
        ({"item_type": "document", "url": "ftp://a.com/x"}, "not an absolute http"),
        ({"item_type": "document", "url": "/relative"}, "not an absolute http"),
        ({"item_type": "document", "url": "http://a.com:99999/"}, "bad port"),
    ],
)
def test_what_cannot_be_keyed(kwargs, message):
    with pytest.raises(ValueError, match=message):
        item_key(**kwargs)
