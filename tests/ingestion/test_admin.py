"""Sources in the admin: what an operator fills in, and how politely a source crawls."""

import pytest

from ingestion import politeness
from ingestion.models import Source
from tests.conftest import ALL_DATABASES

pytestmark = ALL_DATABASES
ADD = "/admin/ingestion/source/add/"


def as_a_browser_posts(form, **typed) -> dict:
    """The form's fields as the page shows them (defaults filled in), with what was typed."""
    data = {}
    for field in form:
        value = field.value()
        if value is True:
            data[field.html_name] = "on"
        elif value not in (None, False):
            data[field.html_name] = field.field.prepare_value(value)
    return {**data, **typed}


def test_adding_a_source_asks_only_for_what_an_operator_knows(admin_client, settings):
    form = admin_client.get(ADD).context["adminform"].form
    assert sorted(
        name for name, field in form.fields.items() if field.required and form[name].value() in (None, "")
    ) == [
        "name",
        "start_url",
    ]
    assert "created_at" not in form.fields

    response = admin_client.post(
        ADD, as_a_browser_posts(form, name="City hall", start_url="https://city.example/documents/")
    )

    assert response.status_code == 302, response.context["adminform"].form.errors
    source = Source.objects.get(name="City hall")
    assert source.created_at is not None and source.allowed_hosts == []
    assert (source.obey_robots_txt, source.max_concurrent_per_host, source.crawl_delay_sec) == (
        True,
        settings.INGESTION_MAX_CONCURRENT_PER_HOST,
        settings.INGESTION_CRAWL_DELAY_SEC,
    )


@pytest.mark.parametrize(
    ("typed", "error"),
    [
        ({"start_url": "ftp://city.example/"}, "start_url"),
        ({"allowed_hosts": "https://city.example/"}, "allowed_hosts"),
        ({"allowed_hosts": "city.example:8080"}, "allowed_hosts"),
        ({"max_concurrent_per_host": "0"}, "max_concurrent_per_host"),
        ({"crawl_delay_sec": "-1"}, "crawl_delay_sec"),
    ],
)
def test_what_cannot_work_is_refused_with_the_field_named(admin_client, typed, error):
    form = admin_client.get(ADD).context["adminform"].form
    data = as_a_browser_posts(form, **{"name": "x", "start_url": "https://city.example/", **typed})
    response = admin_client.post(ADD, data)
    assert response.status_code == 200 and error in response.context["adminform"].form.errors
    assert not Source.objects.exists()


def test_allowed_hosts_are_typed_one_a_line(admin_client):
    form = admin_client.get(ADD).context["adminform"].form
    data = as_a_browser_posts(
        form, name="x", start_url="https://city.example/", allowed_hosts="City.example\r\n\r\nfiles.city.example.\r\n"
    )
    assert admin_client.post(ADD, data).status_code == 302
    source = Source.objects.get()
    assert source.allowed_hosts == ["city.example", "files.city.example"]
    assert (
        "city.example\nfiles.city.example</textarea>"
        in admin_client.get(f"/admin/ingestion/source/{source.id}/change/").content.decode()
    )


def test_a_sources_page_shows_how_politely_it_crawls(admin_client):
    source = Source.objects.create(name="gov", start_url="https://gov.example/docs/", crawl_delay_sec=2.5)
    page = admin_client.get(f"/admin/ingestion/source/{source.id}/change/").content.decode()
    assert "Crawling politely" in page and "pipeline-control-plane/1 (ingestion)" in page
    assert 'name="crawl_delay_sec" value="2.5"' in page and 'name="max_concurrent_per_host"' in page
    assert "https://gov.example/robots.txt: not read recently" in page

    politeness.robots_store("https://gov.example", 200, "User-agent: *\nDisallow: /docs/\nCrawl-delay: 4\n")
    page = admin_client.get(f"/admin/ingestion/source/{source.id}/change/").content.decode()
    assert "https://gov.example/robots.txt (HTTP 200): does not allow the start URL; Crawl-delay 4 s" in page

    listing = admin_client.get("/admin/ingestion/source/").content.decode()
    assert "obey robots.txt" in listing.lower() and "crawl delay (seconds)" in listing.lower()
