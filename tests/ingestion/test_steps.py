"""The steps on real pages served by a local website: discovery of what real HTML carries (one
document spelled many ways, <base href>, odd and malformed links, pages beside documents,
windows-1251 and latin-1 pages declared by header or meta tag, a very long page), and a run of
such a page through a worker to the end."""

import time
import uuid
from urllib.parse import urlsplit

import pytest

from ingestion import keys, services, steps
from ingestion.models import IngestionItem, Source
from jobs.queue.models import Job
from jobs.queue.services import JobSpec, job_enqueue
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.ingestion import site as website
from tests.ingestion.helpers import ended

pytestmark = ALL_DATABASES_COMMITTED
MINISTRY_DOCUMENTS = {
    "/docs/annual-report.pdf": "Annual report 2024",
    "/docs/budget-2024.pdf": "Budget 2024",
    "/docs/road-map.png": "Road map of the region",
    "/docs/r%C3%A9sum%C3%A9.pdf": "Résumé of the minister",
    "/docs/Annual-Report.pdf": "Not the same file: paths are case-sensitive",
}


def source_at(site, path: str, **fields) -> Source:
    """A source starting at ``path`` of the site, by the name its pages use: localhost."""
    start_url = site.base_url.replace("127.0.0.1", "localhost") + path
    fields = {"crawl_delay_sec": 0, "max_concurrent_per_host": 4, **fields}
    return Source.objects.create(name=f"site-{uuid.uuid4().hex[:8]}", start_url=start_url, **fields)


def serve(site, path: str, html: str, content_type: str = "text/html; charset=utf-8", encoding: str = "utf-8"):
    site.files[path] = (content_type, html.encode(encoding))


def discover(source) -> tuple:
    """Run discovery of a new run of ``source`` in this thread."""
    run = services.run_start(source_id=source.id)
    job = Job.objects.get(task="discover", args__run_id=str(run.id))
    return run, steps.discover(step=steps.Step(str(run.id), source, job.job_id))


def discovered(run) -> dict[str, str | None]:
    """``{path?query: label}`` of the documents discovery recorded (the start page left out)."""
    found = {}
    for item in (
        IngestionItem.objects.filter(run=run, stage="discovery").exclude(item_label="Start page").order_by("id")
    ):
        parts = urlsplit(item.document_url)
        found[parts.path + (f"?{parts.query}" if parts.query else "")] = item.item_label
    return found


@pytest.fixture
def ministry(site):
    """The ministry's publications page and its documents."""
    serve(site, "/publications.html", website.page("ministry.html", port=site.base_url.rsplit(":", 1)[1]))
    for number, path in enumerate(MINISTRY_DOCUMENTS):
        site.files[path] = ("application/pdf", website.pdf(f"Document number {number} of the ministry of transport."))
    return source_at(site, "/publications.html")


def test_a_page_linking_its_documents_in_many_spellings_runs_to_the_end(site, ministry, worker):
    run = services.run_start(source_id=ministry.id)

    finished = ended(run)
    assert (finished.status, finished.error_message) == ("completed", None)
    assert discovered(run) == MINISTRY_DOCUMENTS
    assert len(site.requested("/publications.html")) == 1  # one discover, never retried
    assert all(len(site.requested(path)) == 1 for path in MINISTRY_DOCUMENTS)
    jobs = Job.objects.filter(args__run_id=str(run.id))
    assert sorted(jobs.values_list("task", "status", "attempt")) == sorted(
        [("discover", "succeeded", 1)] + [("download", "succeeded", 1)] * 5 + [("ocr", "succeeded", 1)] * 5
    )
    documents = IngestionItem.objects.filter(run=run, stage="documents")
    assert {item.item_label for item in documents} == set(MINISTRY_DOCUMENTS.values())
    assert finished.stats_json["discovery"] == {"total": 6, "completed": 6, "failed": 0}


def test_a_document_whose_job_cannot_be_enqueued_fails_alone_and_the_others_go_on(site, ministry):
    run = services.run_start(source_id=ministry.id)
    budget = keys.normalize_url(ministry.start_url.replace("publications.html", "docs/budget-2024.pdf"))
    key = keys.item_key(item_type="source_url", url=budget)
    job_enqueue(  # what an older producer left under the key the pipeline uses, with other args
        spec=JobSpec(
            queue="default",
            task="download",
            lock_key="older",
            idempotency_key=f"ingestion:{run.id}:download:{key}",
            args={"url": budget, "label": "Budget"},
        )
    )
    job = Job.objects.get(task="discover", args__run_id=str(run.id))
    steps.discover(step=steps.Step(str(run.id), ministry, job.job_id))

    items = {urlsplit(item.document_url).path: item for item in IngestionItem.objects.filter(run=run)}
    assert items["/docs/budget-2024.pdf"].status == "failed"
    assert "already names a different job" in items["/docs/budget-2024.pdf"].error_message
    assert all(item.status == "completed" for path, item in items.items() if path != "/docs/budget-2024.pdf")
    downloads = Job.objects.filter(task="download", args__run_id=str(run.id))
    assert downloads.count() == 4 and set(downloads.values_list("args__url", flat=True)) == {
        keys.normalize_url(ministry.start_url.replace("/publications.html", path))
        for path in MINISTRY_DOCUMENTS
        if path != "/docs/budget-2024.pdf"
    }


def test_pages_beside_documents_are_links_but_not_documents(site, ministry):
    run, result = discover(ministry)

    assert set(discovered(run)) == set(MINISTRY_DOCUMENTS)  # not report.pdf.html, /download?file=old.pdf, /docs/
    start = IngestionItem.objects.get(run=run, item_label="Start page")
    assert start.payload_json == {"links": result["links"], "documents": 5} and result["links"] > 12


def test_a_base_href_resolves_the_relative_links(site):
    serve(site, "/archive/index.html", website.page("base_href.html", port=site.base_url.rsplit(":", 1)[1]))

    run, _result = discover(source_at(site, "/archive/index.html"))
    assert set(discovered(run)) == {
        "/archive/2024/report.pdf",
        "/archive/2023/report.pdf",
        "/docs/annex.pdf",
        "/archive/2024/scan.png",
    }


def test_mailto_tel_javascript_and_malformed_links_are_passed_over(site):
    serve(site, "/contacts.html", website.page("odd_links.html"))

    run, _result = discover(source_at(site, "/contacts.html"))
    assert set(discovered(run)) == {
        "/docs/padded.pdf",
        "/docs/split.pdf",
        "/docs/backslashes.pdf",
        "/docs/get.pdf?id=1&lang=en",
        "/docs/first.pdf",
        "/docs/second.pdf",
        "/docs/space%20name.pdf",
        "/docs/titled.pdf",
    }


@pytest.mark.parametrize(
    ("name", "encoding", "content_type", "meta"),
    [
        ("cyrillic.html", "windows-1251", "text/html; charset=windows-1251", ""),
        (
            "cyrillic.html",
            "windows-1251",
            "text/html",
            '<meta http-equiv="Content-Type" content="text/html; charset=windows-1251">',
        ),
        ("latin.html", "cp1252", "text/html; charset=iso-8859-1", ""),
        ("latin.html", "cp1252", "text/html", '<meta charset="ISO-8859-1">'),
    ],
)
def test_pages_in_windows_1251_and_latin_1_declared_by_header_or_meta(site, name, encoding, content_type, meta):
    serve(site, "/page.html", website.page(name, meta=meta), content_type, encoding)

    run, _result = discover(source_at(site, "/page.html"))
    expected = {
        "cyrillic.html": {
            "/docs/%D0%BE%D1%82%D1%87%D1%91%D1%82-2024.pdf": "Годовой отчёт за 2024 год",
            "/docs/budget.pdf": "Бюджет на 2025 год",
        },
        "latin.html": {
            "/docs/arr%C3%AAt%C3%A9-pr%C3%A9fectoral.pdf": "arrêtés préfectoraux",
            "/docs/r%C3%A9sum%C3%A9.pdf": "résumé des décisions (Größe: 80 kB — ½ page)",
        },
    }
    assert discovered(run) == expected[name]


def test_a_very_long_page_is_discovered_up_to_the_sources_limit(site):
    spellings = ("/docs/r{}.pdf", "docs/r{}.pdf#p1", "./docs/r{}.pdf?")
    rows = "".join(
        f'<tr><td><a href="/news/{n}.html">News {n}</a></td>'
        f'<td><a href="{spellings[n % 3].format(n % 300)}">Report {n % 300}</a></td></tr>\n'
        for n in range(30_000)
    )
    serve(site, "/index.html", f"<html><body><table>{rows}</table></body></html>")
    assert len(site.files["/index.html"][1]) > 3_000_000

    started = time.monotonic()
    run, result = discover(source_at(site, "/index.html", max_documents=150))
    elapsed = time.monotonic() - started

    assert result == {"links": 30_000 + 300, "documents": 150}
    assert list(discovered(run)) == [f"/docs/r{n}.pdf" for n in range(150)]
    assert Job.objects.filter(task="download", args__run_id=str(run.id)).count() == 150
    assert elapsed < 30, f"{elapsed:.1f} s"
