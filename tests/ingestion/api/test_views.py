"""The ingestion API for external workers: Bearer auth, the project's error shape."""

import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from ingestion import services
from ingestion.models import IngestionItem, IngestionRun, Source
from tests.conftest import ALL_DATABASES, ALL_DATABASES_COMMITTED
from tests.db_helpers import raw_connection
from tests.ingestion.helpers import item, new_run

pytestmark = ALL_DATABASES


def test_create_a_run_and_read_it_back(api):
    source = Source.objects.create(name="gov", start_url="http://127.0.0.1/")
    created = api.post("/api/v1/ingestion/runs", {"source_id": source.id}, format="json")

    assert created.status_code == 201
    run = created.json()
    assert (run["status"], run["source_name"], run["stats_json"]["documents"]["skipped"]) == ("pending", "gov", 0)
    assert api.get(f"/api/v1/ingestion/runs/{run['id']}").json()["id"] == run["id"]


def test_an_unknown_source_or_run_is_a_404_in_the_error_shape(api):
    missing = api.post("/api/v1/ingestion/runs", {"source_id": 999_999}, format="json")
    assert missing.status_code == 404 and missing.json()["code"] == "source_not_found"
    assert api.get(f"/api/v1/ingestion/runs/{uuid.uuid4()}").json()["code"] == "run_not_found"


def test_runs_are_filtered_by_status_and_source(api):
    pending, running = new_run("a"), new_run("b")
    api.patch(f"/api/v1/ingestion/runs/{running.id}", {"status": "running"}, format="json")

    active = api.get("/api/v1/ingestion/runs?status=running").json()["results"]
    of_source = api.get(f"/api/v1/ingestion/runs?source={pending.source_id}").json()["results"]
    assert [run["id"] for run in active] == [str(running.id)]
    assert [run["id"] for run in of_source] == [str(pending.id)]


def test_an_update_follows_the_lifecycle(api):
    run = new_run()
    done = api.patch(f"/api/v1/ingestion/runs/{run.id}", {"status": "completed"}, format="json")
    assert done.status_code == 409 and done.json()["code"] == "invalid_transition"
    api.patch(f"/api/v1/ingestion/runs/{run.id}", {"status": "running", "active_stage": "ocr"}, format="json")
    ended = api.patch(
        f"/api/v1/ingestion/runs/{run.id}", {"status": "failed", "error_message": "ocr down"}, format="json"
    )

    body = ended.json()
    assert (body["status"], body["error_message"], body["active_stage"]) == ("failed", "ocr down", "ocr")
    assert body["finished_at"] is not None


def test_upsert_one_item_or_many_and_list_them(api):
    run = new_run()
    one = api.post("/api/v1/ingestion/items", item(run), format="json")
    many = api.post(
        "/api/v1/ingestion/items",
        {
            "items": [
                item(run, status="failed"),
                item(
                    run,
                    item_key="review",
                    stage="ocr",
                    item_type="ocr_job",
                    status="review_required",
                    needs_review=True,
                ),
            ]
        },
        format="json",
    )

    assert one.status_code == 200 and one.json()["items"][0]["created"] is True
    assert [result["created"] for result in many.json()["items"]] == [True, False]  # sorted by key
    failed = api.get(f"/api/v1/ingestion/items?run={run.id}&status=failed").json()["results"]
    review = api.get(f"/api/v1/ingestion/items?run={run.id}&needs_review=true&stage=ocr").json()["results"]
    assert [row["item_key"] for row in failed] == ["source_url:1"]
    assert [row["item_key"] for row in review] == ["review"]


def test_a_bad_item_is_a_400_naming_it_and_nothing_is_written(api):
    run = new_run()
    response = api.post("/api/v1/ingestion/items", {"items": [item(run), item(run, status="done")]}, format="json")

    assert response.status_code == 400
    assert response.json()["code"] == "validation_error" and "items[1].status" in response.json()["details"]
    assert not IngestionItem.objects.exists()


def test_malformed_envelopes_and_filters_are_400s(api):
    assert api.post("/api/v1/ingestion/items", {"items": []}, format="json").status_code == 400
    assert api.post("/api/v1/ingestion/items", {"items": "x"}, format="json").status_code == 400
    assert api.post("/api/v1/ingestion/items", [1, 2], format="json").status_code == 400
    assert api.get("/api/v1/ingestion/items?run=not-a-uuid").status_code == 400
    assert api.get("/api/v1/ingestion/runs?cursor=garbage").status_code == 400


def test_without_a_token_nothing_is_readable(anonymous):
    assert anonymous.get("/api/v1/ingestion/runs").status_code in (401, 403)


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("post", "/api/v1/ingestion/runs", {"source_id": 1, "manaul": True}, "manaul"),
        ("patch", "/api/v1/ingestion/runs/{run}", {"status": "running", "error_mesage": "x"}, "error_mesage"),
        ("post", "/api/v1/ingestion/items", {"items": [], "dry_run": True}, "dry_run"),
    ],
)
def test_a_misspelt_field_is_a_400_naming_it_and_nothing_is_written(api, method, path, body, field):
    run = new_run()
    response = getattr(api, method)(path.format(run=run.id), body, format="json")

    assert response.status_code == 400
    assert response.json()["code"] == "validation_error" and field in response.json()["details"]
    assert IngestionRun.objects.get(id=run.id).status == "pending" and IngestionRun.objects.count() == 1


def test_a_misspelt_item_field_or_an_empty_update_is_a_400(api):
    run = new_run()
    misspelt = api.post("/api/v1/ingestion/items", item(run, stauts="failed"), format="json")
    assert misspelt.status_code == 400 and "items[0].stauts" in misspelt.json()["details"]
    empty = api.patch(f"/api/v1/ingestion/runs/{run.id}", {}, format="json")
    assert empty.status_code == 400 and empty.json()["code"] == "validation_error"
    assert not IngestionItem.objects.exists()


@pytest.mark.parametrize("path", ["/api/v1/ingestion/runs?stauts=failed", "/api/v1/ingestion/items?rn=x&run="])
def test_an_unknown_query_parameter_is_a_400_not_every_row(api, path):
    new_run()
    response = api.get(path)
    assert response.status_code == 400 and set(response.json()["details"]) & {"stauts", "rn"}


def test_a_query_value_is_honoured_or_refused_and_a_run_takes_no_query(api):
    run = new_run()
    review = item(run, item_key="review", stage="ocr", item_type="ocr_job", status="review_required", needs_review=True)
    services.items_upsert(items=[item(run), review])

    flagged = api.get("/api/v1/ingestion/items?needs_review=1").json()["results"]
    assert [row["item_key"] for row in flagged] == ["review"]
    unclear = api.get("/api/v1/ingestion/items?needs_review=maybe")
    assert unclear.status_code == 400 and "needs_review" in unclear.json()["details"]
    misspelt = api.get(f"/api/v1/ingestion/runs/{run.id}?feilds=id")
    assert misspelt.status_code == 400 and misspelt.json()["code"] == "validation_error"
    assert "feilds" in misspelt.json()["details"]


def test_an_item_written_to_a_canceled_run_is_a_409(api):
    run = new_run()
    services.run_cancel(run_id=run.id, by="test")
    response = api.post("/api/v1/ingestion/items", item(run), format="json")
    assert response.status_code == 409 and response.json()["code"] == "run_canceled"


@ALL_DATABASES_COMMITTED
def test_an_update_moves_updated_at_and_a_run_gone_before_the_answer_is_a_404(api, monkeypatch):
    run = new_run()
    before = api.get(f"/api/v1/ingestion/runs/{run.id}").json()["updated_at"]
    after = api.patch(f"/api/v1/ingestion/runs/{run.id}", {"active_stage": "discovery"}, format="json").json()
    assert after["updated_at"] > before and after["stats_json"]["updated_at"]

    updated = services.run_update

    def deleted_meanwhile(**kwargs):
        result = updated(**kwargs)
        with raw_connection(autocommit=True) as other:  # another client deletes it before the answer is read
            other.execute("DELETE FROM ingestion_runs WHERE id = %s", [run.id])
        return result

    monkeypatch.setattr(services, "run_update", deleted_meanwhile)
    gone = api.patch(f"/api/v1/ingestion/runs/{run.id}", {"active_stage": "ocr"}, format="json")
    assert gone.status_code == 404 and gone.json()["code"] == "run_not_found"


@ALL_DATABASES_COMMITTED  # in a test's transaction the reads would join it
@pytest.mark.parametrize("path", ["/api/v1/ingestion/runs", "/api/v1/ingestion/runs/{run}", "/api/v1/ingestion/items"])
def test_every_read_is_one_snapshot(api, path):
    run = new_run()
    with CaptureQueriesContext(connection) as queries:
        assert api.get(path.format(run=run.id)).status_code == 200
    statements = [query["sql"] for query in queries.captured_queries]
    isolation = next(n for n, sql in enumerate(statements) if "REPEATABLE READ, READ ONLY" in sql)
    assert isolation < next(n for n, sql in enumerate(statements) if '"ingestion_' in sql)
