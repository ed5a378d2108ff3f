"""The /pipeline pages through Django's test client: permissions, actions, fragments."""

import re
import uuid
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.utils import timezone

from ingestion import selectors, services
from ingestion.models import IngestionItem, IngestionRun, Source
from jobs.queue.models import Job
from jobs.queue.states import JobStatus
from tests.conftest import ALL_DATABASES, ALL_DATABASES_COMMITTED
from tests.db_helpers import raw_connection
from tests.ingestion.bounded_reads import rows_read
from tests.ingestion.helpers import item, new_run, planted_run

pytestmark = ALL_DATABASES


VIEW, START, CANCEL, RETRY = "view_ingestionrun", "add_ingestionrun", "cancel_ingestionrun", "retry_job"


def staff(client, *codenames: str) -> User:
    user = User.objects.create_user(f"op-{uuid.uuid4().hex[:6]}", password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    client.force_login(user)
    return user


def test_the_runs_page_lists_sources_active_runs_and_history(client):
    staff(client, VIEW, START)
    active, ended = new_run("active"), new_run("ended")
    services.run_update(run_id=ended.id, status="failed", error_message="1 item(s) failed")

    page = client.get("/pipeline/").content.decode()
    assert "Run active" in page and "Run ended" in page  # a Run button per source
    active_part, history_part = page.split("<h2>History</h2>")
    assert str(active.id)[:8] in active_part.split("<h2>Active runs</h2>")[1]
    assert str(ended.id)[:8] in history_part and "1 item(s) failed" in history_part
    filtered = client.get("/pipeline/?status=completed").content.decode().split("<h2>History</h2>")[1]
    assert str(ended.id)[:8] not in filtered


def test_a_run_page_shows_the_lists_problems_and_jobs(client):
    staff(client, VIEW, CANCEL, RETRY)
    run = new_run()
    services.items_upsert(
        items=[
            item(run, item_key="u1", document_url="http://x.example/a.pdf"),
            item(
                run,
                item_key="d1",
                stage="documents",
                item_type="document",
                status="failed",
                error_message="HTTP 404",
                last_error_message="HTTP 404 again",
            ),
            item(
                run,
                item_key="o1",
                stage="ocr",
                item_type="ocr_job",
                status="review_required",
                needs_review=True,
                review_reason="too little text (0 letters)",
            ),
        ]
    )
    page = client.get(f"/pipeline/runs/{run.id}/").content.decode()

    problems = page.split('id="problems"')[1].split("</table>")[0]
    assert "HTTP 404 again" in problems and "needs review: too little text (0 letters)" in problems
    assert 'id="list-discovery"' in page and "a.pdf" in page.split('id="list-discovery"')[1]
    assert "Retry failed" in page and "Cancel" in page
    fragment = client.get(f"/pipeline/runs/{run.id}/?fragment=1").content.decode()
    assert fragment.startswith('<div id="refreshing-body" data-active="true">')


def test_run_retry_and_cancel_are_posts_that_need_their_permissions(client):
    user = staff(client, VIEW)
    source = Source.objects.create(name="s", start_url="http://127.0.0.1/")
    assert "Run s" not in client.get("/pipeline/").content.decode()
    assert client.post(f"/pipeline/sources/{source.id}/run").status_code == 403

    user.user_permissions.add(*Permission.objects.filter(codename__in=[START, CANCEL]))
    response = client.post(f"/pipeline/sources/{source.id}/run")
    run = IngestionRun.objects.get(source=source)
    assert response.status_code == 302 and response.url == f"/pipeline/runs/{run.id}/"
    assert Job.objects.filter(task="discover", args__run_id=str(run.id)).exists()

    client.post(f"/pipeline/runs/{run.id}/cancel")
    assert IngestionRun.objects.get(id=run.id).status == "canceled"
    assert client.get(f"/pipeline/runs/{run.id}/cancel").status_code == 405
    assert client.post(f"/pipeline/runs/{run.id}/explode").status_code == 404


@pytest.mark.parametrize("path", ["/pipeline/runs/not-a-uuid/", "/pipeline/runs/9f1c6a52-3d0e-4c8b-a6f1-2b7d9e4c0a17/"])
def test_unknown_runs_are_404s(client, path):
    staff(client, VIEW)
    assert client.get(path).status_code == 404


def test_pages_need_a_staff_login_and_the_view_permission(client):
    assert client.get("/pipeline/").status_code == 302  # to the admin login
    staff(client)
    assert client.get("/pipeline/").status_code == 403


def test_the_admin_runs_selected_sources(admin_client):
    source = Source.objects.create(name="admin-run", start_url="http://127.0.0.1/")
    response = admin_client.post(
        "/admin/ingestion/source/", {"action": "run_sources", "_selected_action": [source.id]}, follow=True
    )

    run = IngestionRun.objects.get(source=source)
    assert f"run {run.id} started" in response.content.decode()
    assert Job.objects.filter(task="discover", args__run_id=str(run.id)).exists()


def test_long_lists_are_cut_and_link_to_the_admin(admin_client, monkeypatch):
    monkeypatch.setattr("ingestion.selectors.LIST_LIMIT", 2)
    run = new_run()
    services.items_upsert(items=[item(run, item_key=f"u{n}") for n in range(3)])

    page = admin_client.get(f"/pipeline/runs/{run.id}/").content.decode()
    assert "The first 2 of 3" in page
    link = page.split("The first 2 of 3:")[1].split('href="')[1].split('"')[0].replace("&amp;", "&")
    listed = admin_client.get(link)
    assert listed.status_code == 200 and "3 ingestion items" in listed.content.decode()


def test_only_http_urls_become_links(client):
    staff(client, VIEW)
    run = new_run()
    services.items_upsert(
        items=[
            item(run, item_key="evil", document_url="javascript:alert(document.cookie)", item_label="<b>x</b>"),
            item(run, item_key="good", document_url="https://x.example/a.pdf", item_label="A"),
        ]
    )
    page = client.get(f"/pipeline/runs/{run.id}/").content.decode()

    assert "javascript:" not in page and "<b>x</b>" not in page and "&lt;b&gt;x&lt;/b&gt;" in page
    assert 'href="https://x.example/a.pdf"' in page


@ALL_DATABASES_COMMITTED
def test_a_run_page_is_one_snapshot_while_another_client_writes(client, monkeypatch):
    staff(client, VIEW)
    run = new_run()
    services.items_upsert(items=[item(run, item_key="u1", document_url="http://x.example/first.pdf")])
    read_lists = selectors.run_stage_items

    def lists_after_another_client_wrote(*, run, counts):
        with raw_connection(autocommit=True) as other:
            other.execute(
                "INSERT INTO ingestion_items (run_id, source_id, item_key, stage, item_type, status, error_message,"
                " document_url) VALUES (%s, %s, 'late', 'discovery', 'source_url', 'failed', 'late failure',"
                " 'http://x.example/late.pdf')",
                [run.id, run.source_id],
            )
        return read_lists(run=run, counts=counts)

    monkeypatch.setattr(selectors, "run_stage_items", lists_after_another_client_wrote)
    page = client.get(f"/pipeline/runs/{run.id}/").content.decode()

    assert "first.pdf" in page and "late.pdf" not in page and "late failure" not in page
    assert "total <strong>1</strong>" in page  # the stats and the lists agree
    assert IngestionItem.objects.filter(run=run).count() == 2  # the write happened, after the page's snapshot


def test_actions_on_a_run_or_source_that_is_gone_are_404s(client):
    staff(client, VIEW, START, CANCEL, RETRY)
    assert client.post(f"/pipeline/runs/{uuid.uuid4()}/cancel").status_code == 404
    assert client.post(f"/pipeline/runs/{uuid.uuid4()}/retry").status_code == 404
    assert client.post("/pipeline/sources/999999/run").status_code == 404


def test_the_refreshed_runs_list_keeps_its_filters_and_page(client):
    staff(client, VIEW)
    source = Source.objects.create(name="s", start_url="http://127.0.0.1/")
    for number in range(30):
        run = services.run_create(source_id=source.id)
        services.run_update(run_id=run.id, status="failed", error_message=f"failure {number:02}")
    services.run_create(source_id=source.id)  # active: the page refreshes

    fragment = client.get("/pipeline/?status=failed&page=2&fragment=1").content.decode()
    assert fragment.startswith('<div id="refreshing-body" data-active="true">')
    assert "page 2 of 2" in fragment and "failure 04" in fragment and "failure 29" not in fragment


def test_a_skipped_item_says_why_and_its_stages_card_counts_it(client):
    staff(client, VIEW)
    run = new_run()
    reason = "OCR is not available: tesseract is not installed"
    services.items_upsert(
        items=[
            item(
                run,
                item_key="o1",
                stage="ocr",
                item_type="ocr_job",
                status="skipped",
                ingest_reason=reason,
                item_label="Letter to residents",
            ),
            item(run, item_key="o2", stage="ocr", item_type="ocr_job", status="completed"),
        ]
    )
    page = client.get(f"/pipeline/runs/{run.id}/").content.decode()

    row = page.split('id="list-ocr"')[1].split("Letter to residents")[1].split("</tr>")[0]
    assert "skipped" in row and reason in row
    ocr_card = page.split('id="card-ocr"')[1].split("</div>")[0]
    assert "total <strong>2</strong>" in ocr_card and "skipped <strong>1</strong>" in ocr_card
    assert "review_required <strong>0</strong>" in ocr_card  # the seed's statuses, zero too


def test_a_run_page_says_how_long_it_took_in_seconds_and_names_its_run_in_the_breadcrumbs(client):
    staff(client, VIEW)
    run = new_run("City hall")
    started = timezone.now() - timedelta(seconds=12.4)
    IngestionRun.objects.filter(id=run.id).update(status="completed", started_at=started, finished_at=timezone.now())
    page = client.get(f"/pipeline/runs/{run.id}/").content.decode()

    assert re.search(r'id="run-took">Took 12\.\d s<', page), page.split('id="run-took"')[1][:60]
    crumbs = re.sub(r"\s+", " ", page.split('class="breadcrumbs"')[1].split("</ol>")[0])
    assert f'Pipeline runs</a></li> <li aria-current="page">Run {str(run.id)[:8]} of City hall</li>' in crumbs
    listed = client.get("/pipeline/?status=completed").content.decode()
    assert re.search(r"<td>12\.\d s</td>", listed) and "minutes" not in listed


def test_a_run_of_100000_items_shows_its_first_items_and_counts_reading_no_more_than_a_page(client):
    staff(client, VIEW)
    run = planted_run(items=100_000, jobs=selectors.JOBS_COUNTED + 500, failed_jobs=5)

    answer, read = rows_read(client.get, f"/pipeline/runs/{run.id}/", tables={"ingestion_items", "dl_jobs"})
    page = answer.content.decode()

    counts = {sql: rows for sql, rows in read.items() if "enum_range" in sql}  # the jobs by status
    # The succeeded cut off and the failed, over a loop per status (EXPLAIN rounds each loop's rows).
    assert len(counts) == 1 and 0 <= max(counts.values()) - (selectors.JOBS_COUNTED + 1 + 5) <= len(JobStatus), counts
    read = {sql: rows for sql, rows in read.items() if sql not in counts}
    assert read and max(read.values()) <= selectors.JOBS_COUNTED + 1, read  # a page, or a count cut off
    items_read = {sql: rows for sql, rows in read.items() if "ingestion_items" in sql}
    assert max(items_read.values()) <= selectors.LIST_LIMIT + 1, items_read
    assert f"The first {selectors.LIST_LIMIT} of 33333:" in page  # each stage's list, its count kept apart
    assert "The first 25 of 2000:" in page  # the problems: every 50th item failed
    summary = re.sub(r"\s+", " ", page.split('id="jobs-summary">')[1].split("<a ")[0])
    assert summary == f"{selectors.JOBS_COUNTED + 5}+ jobs: {selectors.JOBS_COUNTED}+ succeeded, 5 failed. "
