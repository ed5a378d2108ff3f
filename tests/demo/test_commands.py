"""``manage.py demo`` and ``demo --remove``, and the demo website the service serves itself."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from ingestion.models import Source
from jobs.queue.models import Job
from pipeline_project.demo import config

DB = pytest.mark.django_db(databases=["default", "pipeline"])


def _demo(*args) -> str:
    out = StringIO()
    call_command("demo", *args, stdout=out)
    return out.getvalue()


@DB
def test_demo_then_demo_again_then_remove():
    first = _demo("--base-url", "http://127.0.0.1:8123")
    second = _demo("--base-url", "http://127.0.0.1:8123")
    assert "Demo created (source: 1, run: 1, jobs: 12, schedule: 1, processes: 3" in first
    assert "Demo created (source: 0, run: 0, jobs: 0, schedule: 0, processes: 0" in second
    assert "http://127.0.0.1:8123/pipeline/" in first
    assert Source.objects.get().start_url == "http://127.0.0.1:8123/demo/site/index.html"

    removed = _demo("--remove")

    assert "Demo removed (runs: 1, jobs: 12, schedule: 1, processes: 3" in removed
    assert not Source.objects.exists() and not Job.objects.exists()


@DB
def test_a_bad_base_url_is_a_command_error():
    with pytest.raises(CommandError, match="base URL must be"):
        _demo("--base-url", "file:///etc")


@pytest.mark.parametrize(
    ("path", "content_type", "starts"),
    [
        ("/demo/site/", "text/html", b"<!doctype html>"),
        ("/demo/site/reports.html", "text/html", b"<!doctype html>"),
        ("/demo/site/files/annual-report-2024.pdf", "application/pdf", b"%PDF-"),
        ("/demo/site/files/budget-summary-2025.pdf", "application/pdf", b"%PDF-"),
        ("/demo/site/files/scanned-letter.png", "image/png", b"\x89PNG"),
    ],
)
def test_the_site_serves_its_pages_and_files_with_their_types(client, path, content_type, starts):
    response = client.get(path)

    assert response.status_code == 200
    assert response["Content-Type"].startswith(content_type)
    assert b"".join(response.streaming_content).startswith(starts)


def test_the_site_links_its_documents_more_than_once_and_its_pages_to_each_other(client):
    index = b"".join(client.get("/demo/site/index.html").streaming_content).decode()
    assert index.count("annual-report-2024.pdf") == 3 and index.count("budget-summary-2025.pdf") == 2
    assert 'href="reports.html"' in index and 'href="about.html"' in index
    assert all((config.SITE_DIR / "files" / name).stat().st_size < 100_000 for name in ("scanned-letter.png",))


@pytest.mark.parametrize(
    "path", ["/demo/site/../settings.py", "/demo/site/%2e%2e/config.py", "/demo/site/nothing.html"]
)
def test_nothing_outside_the_site_is_served(client, path):
    assert client.get(path).status_code == 404


def test_the_site_is_read_only(client):
    assert client.post("/demo/site/index.html").status_code == 405
