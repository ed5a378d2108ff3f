import re

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import connections

from tests.conftest import ALL_DATABASES
from tests.ingestion.bounded_reads import rows_read
from tracking.admin import WORST_SHARDS, ShardFilter
from tracking.models import PipelineTracking, StageChange

pytestmark = ALL_DATABASES

CHANGELIST = "/admin/tracking/pipelinetracking/"
TRACKED = {"pipeline_tracking"}


@pytest.fixture
def rows():
    def make(filename, shard, **statuses):
        return PipelineTracking.objects.create(filename=filename, shard=shard, **statuses)

    return {
        "failed_worker": make(
            "20250101000000", 0, event_ingest_status="done", shard_splitter_status="done", shard_worker_status="failed"
        ),
        "running_worker": make(
            "20250101000000", 1, event_ingest_status="done", shard_splitter_status="done", shard_worker_status="started"
        ),
        "failed_sender": make(
            "20250202000000",
            0,
            event_ingest_status="done",
            shard_splitter_status="done",
            shard_worker_status="done",
            mysql_sender_status="failed",
        ),
    }


def test_changelist_has_a_filter_per_stage_status_and_shard(admin_client, rows):
    response = admin_client.get(CHANGELIST)

    assert response.status_code == 200
    html = response.content.decode()
    for column in ["event_ingest_status", "shard_splitter_status", "shard_worker_status", "mysql_sender_status"]:
        for status in ["new", "started", "done", "failed"]:
            assert f'href="?{column}__exact={status}"' in html
    assert 'href="?shard=0"' in html and 'href="?shard=1"' not in html  # only shards with failed rows are listed
    assert '<input type="number" id="shard-filter-value" name="shard"' in html  # any other is typed in
    kept = admin_client.get(CHANGELIST, {"shard": 1, "shard_worker_status__exact": "started"}).content.decode()
    form = kept.split('id="shard-filter"')[1].split("</form>")[0]
    assert '<input type="hidden" name="shard_worker_status__exact" value="started">' in form
    assert 'name="shard" min="0" value="1"' in form and 'type="hidden" name="shard"' not in form


@pytest.mark.parametrize("shard", ["abc", "-1", "1.5", "²", "٣", str(2**31), "9" * 5000])
def test_a_shard_no_row_can_have_is_refused_as_the_admin_refuses_a_filter(admin_client, rows, shard):
    response = admin_client.get(CHANGELIST, {"shard": shard})

    assert (response.status_code, response.headers["Location"]) == (302, f"{CHANGELIST}?e=1")
    assert list(admin_client.get(CHANGELIST, {"shard": 1}).context["cl"].result_list) == [rows["running_worker"]]
    assert len(admin_client.get(CHANGELIST, {"shard": ""}).context["cl"].result_list) == 3  # the form sent empty


def test_changelist_filters_and_searches(admin_client, rows):
    filtered = admin_client.get(CHANGELIST, {"shard_worker_status__exact": "failed"})
    assert list(filtered.context["cl"].result_list) == [rows["failed_worker"]]

    by_shard = admin_client.get(CHANGELIST, {"shard": 1})
    assert list(by_shard.context["cl"].result_list) == [rows["running_worker"]]

    searched = admin_client.get(CHANGELIST, {"q": "202502"})
    assert list(searched.context["cl"].result_list) == [rows["failed_sender"]]


@pytest.mark.parametrize(
    ("action", "column", "expected_changed"),
    [
        ("retry_shard_worker", "shard_worker_status", 1),
        ("retry_mysql_sender", "mysql_sender_status", 1),
        ("retry_shard_splitter", "shard_splitter_status", 0),
    ],
)
def test_retry_action_changes_only_failed_rows_of_its_stage(admin_client, rows, action, column, expected_changed):
    ids = [str(row.pk) for row in rows.values()]

    response = admin_client.post(CHANGELIST, {"action": action, "_selected_action": ids}, follow=True)

    message = str(next(iter(response.context["messages"])))
    assert re.search(
        rf"{expected_changed} failed row\(s\) set back to new; {3 - expected_changed} row\(s\) were not failed", message
    )
    after = {row.pk: getattr(row, column) for row in PipelineTracking.objects.all()}
    for row in rows.values():
        before = getattr(row, column)
        assert after[row.pk] == ("new" if before == "failed" else before)


def test_rows_cannot_be_edited_or_added(admin_client, rows):
    assert admin_client.get(f"{CHANGELIST}add/").status_code == 403
    detail = admin_client.get(f"{CHANGELIST}{rows['failed_worker'].pk}/change/")
    assert detail.status_code == 200
    assert 'name="_save"' not in detail.content.decode()


def test_retry_actions_need_change_permission(client, rows):
    viewer = get_user_model().objects.create_user("viewer", password="pw", is_staff=True)
    from django.contrib.auth.models import Permission

    viewer.user_permissions.add(Permission.objects.get(codename="view_pipelinetracking"))
    client.force_login(viewer)

    response = client.get(CHANGELIST)

    assert response.status_code == 200
    assert "retry_shard_worker" not in response.content.decode()


def test_summary_page_draws_a_chart(admin_client, rows):
    response = admin_client.get(f"{CHANGELIST}summary/")

    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="summary-chart"' in html
    for stage in ["event-ingest", "shard-splitter", "shard-worker", "mysql-sender"]:
        assert f'data-stage="{stage}"' in html
    assert 'aria-label="shard-worker: 0 new, 1 started, 1 done, 1 failed"' in html
    assert 'data-shard="0"' in html and 'data-shard="1"' in html
    assert "total 2</a> · " in html and "done 0</a> · " in html and "failed 2</a>" in html
    assert "summary/" in admin_client.get(CHANGELIST).content.decode()  # linked from the list


def test_a_row_page_shows_its_stage_history(admin_client, rows):
    row = rows["failed_worker"]
    PipelineTracking.objects.filter(pk=row.pk).update(shard_worker_status="new")

    html = admin_client.get(f"{CHANGELIST}{row.pk}/change/").content.decode()

    assert "Stage history" in html
    changes = list(StageChange.objects.filter(row=row).values_list("stage", "status"))
    assert changes == [("shard-worker", "new")] and "shard-worker" in html


def test_every_summary_count_links_to_the_rows_behind_it(admin_client, rows):
    html = admin_client.get(f"{CHANGELIST}summary/").content.decode()

    link = f'href="{CHANGELIST}?shard_worker_status__exact=failed">failed 1</a>'
    assert link in html
    filtered = admin_client.get(f"{CHANGELIST}?shard_worker_status__exact=failed")
    assert filtered.status_code == 200 and len(filtered.context["cl"].result_list) == 1
    assert f'href="{CHANGELIST}?shard=0&amp;failed_anywhere=yes">failed' in html
    failed_anywhere = admin_client.get(f"{CHANGELIST}?failed_anywhere=yes").context["cl"].result_list
    assert {row.pk for row in failed_anywhere} == {rows["failed_worker"].pk, rows["failed_sender"].pk}


def test_summary_page_requires_staff(client):
    response = client.get(f"{CHANGELIST}summary/")

    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


def test_summary_page_needs_the_view_permission(client):
    user = get_user_model().objects.create_user("nobody", password="pw", is_staff=True)
    client.force_login(user)
    assert client.get(f"{CHANGELIST}summary/").status_code == 403

    user.user_permissions.add(Permission.objects.get(codename="view_pipelinetracking"))
    assert client.get(f"{CHANGELIST}summary/").status_code == 200


def planted_file(shards: int) -> None:
    """One file of ``shards`` shards in one statement: every 97th failed at shard-worker, every 5th
    started there, the rest done; analyzed as a year's table would be."""
    with connections["pipeline"].cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO pipeline_tracking (filename, shard, event_ingest_status, shard_splitter_status,
                                           shard_worker_status, mysql_sender_status)
            SELECT 'big-file.bin', s, 'done', 'done',
                   CASE WHEN s %% 97 = 0 THEN 'failed' WHEN s %% 5 = 0 THEN 'started' ELSE 'done' END,
                   CASE WHEN s %% 97 = 0 OR s %% 5 = 0 THEN 'new' ELSE 'done' END
            FROM generate_series(0, %(shards)s - 1) AS s
            """,
            {"shards": shards},
        )
        cursor.execute("ANALYZE pipeline_tracking")


def test_a_file_of_5000_shards_is_summed_up_and_its_list_filters_by_a_typed_shard_reading_a_page(admin_client):
    planted_file(5000)

    answer, read = rows_read(admin_client.get, f"{CHANGELIST}summary/", tables=TRACKED)
    summary = answer.content.decode()
    assert not read, read  # from the counts the triggers keep: no tracked row read
    assert len(re.findall(r'data-shard="\d+"', summary)) == WORST_SHARDS
    assert re.findall(r'data-shard="(\d+)"', summary)[:3] == ["0", "97", "194"]  # the failed ones first
    by_stage = summary.split('<tr data-stage="shard-worker">')[1].split("</tr>")[0]
    assert re.findall(r">(\d+)<", by_stage) == ["0", "989", "3959", "52"]  # shards new, started, done, failed
    assert "5000 in all, 1041 not through mysql-sender yet" in summary

    answer, read = rows_read(admin_client.get, CHANGELIST, tables=TRACKED)
    listing = answer.content.decode()
    assert max(read.values()) <= 101, read  # a page and one more
    shard_filter = listing.split('data-filter-title="shard"')[1].split("</details>")[0]
    assert shard_filter.count("<li") <= ShardFilter.LISTED + 2  # All, the note, the most failed
    typed = admin_client.get(CHANGELIST, {"shard": 4321})
    assert [row.shard for row in typed.context["cl"].result_list] == [4321]
