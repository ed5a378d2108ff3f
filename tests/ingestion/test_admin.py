"""Sources in the admin: what an operator fills in, and how politely a source crawls; the runs'
and items' lists: each run named and linked to its page, how long it took in seconds, a run's
100,000 items a page at a time with their count kept apart."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from ingestion import politeness
from ingestion.models import IngestionItem, IngestionRun, Source
from tests.conftest import ALL_DATABASES
from tests.ingestion.bounded_reads import rows_read
from tests.ingestion.helpers import new_run, planted_run

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


def test_the_runs_list_links_each_run_to_its_page_and_says_how_long_it_took(admin_client):
    run = new_run("City hall")
    IngestionRun.objects.filter(id=run.id).update(
        status="completed", started_at=timezone.now() - timedelta(seconds=3.2), finished_at=timezone.now()
    )
    listing = admin_client.get("/admin/ingestion/ingestionrun/").content.decode()

    assert f'<a href="/pipeline/runs/{run.id}/">Run {str(run.id)[:8]}</a>' in listing
    assert re.search(r">3\.\d s<", listing) and "Show counts" not in listing


def test_a_runs_100000_items_list_a_page_at_a_time_counted_from_the_runs_counts(admin_client):
    run = planted_run(items=100_000)
    items = "/admin/ingestion/ingestionitem/"

    answer, read = rows_read(admin_client.get, f"{items}?run={run.id}&stage__exact=ocr", tables={"ingestion_items"})
    listing = answer.content.decode()

    assert max(read.values()) <= 101, read  # a page and one more, not a count of the run's items
    assert "33333 ingestion items" in listing and "Older »" in listing
    assert "OCR is not installed on this worker" in listing  # why a skipped item was skipped
    assert f'<a href="/pipeline/runs/{run.id}/">Run {str(run.id)[:8]}</a>' in listing
    skipped = admin_client.get(items, {"run": str(run.id), "status__exact": "skipped"}).content.decode()
    assert f"{IngestionItem.objects.filter(run=run, status='skipped').count()} ingestion items" in skipped
    searched = admin_client.get(items, {"run": str(run.id), "q": "Letter 7"}).content.decode()
    assert "100+ ingestion items" in searched  # a search's count is not known: the page says more follow
