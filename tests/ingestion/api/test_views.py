"""The ingestion API for external workers: Bearer auth, the project's error shape."""

import uuid

from ingestion.models import IngestionItem, Source
from tests.conftest import ALL_DATABASES
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
