"""The seed 000 endpoints: paths, JSON shapes, transitions and the error contract."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.conftest import ALL_DATABASES
from tracking.models import PipelineTracking

pytestmark = ALL_DATABASES

BASE = "/api/v1/pipeline"
STAGE_COLUMNS = {
    "shard-splitter": "shard_splitter_status",
    "shard-worker": "shard_worker_status",
    "mysql-sender": "mysql_sender_status",
}
PREVIOUS_COLUMN = {
    "shard-splitter": "event_ingest_status",
    "shard-worker": "shard_splitter_status",
    "mysql-sender": "shard_worker_status",
}


def post(api, path, body):
    return api.post(f"{BASE}{path}", body, format="json")


def register(api, filename="20250101000000", shards=(0, 1)):
    response = post(api, "/files/register", {"filename": filename, "shards": list(shards)})
    assert response.status_code == 200, response.content
    return response.json()


def statuses(filename, shard):
    return PipelineTracking.objects.filter(filename=filename, shard=shard).values().get()


def make_rows(filename, shards, **columns):
    """Rows in an arbitrary state, bypassing the API."""
    for shard in shards:
        PipelineTracking.objects.create(filename=filename, shard=shard, **columns)


# --- register ---------------------------------------------------------------------------


def test_register_creates_one_row_per_shard_with_event_ingest_started(api):
    body = register(api, shards=[1, 0])

    assert body == {"filename": "20250101000000", "shards": [0, 1], "created": True}
    rows = list(PipelineTracking.objects.order_by("shard").values())
    assert [row["shard"] for row in rows] == [0, 1]
    for row in rows:
        assert row["event_ingest_status"] == "started"
        assert row["shard_splitter_status"] == row["shard_worker_status"] == row["mysql_sender_status"] == "new"
        assert row["created_at"] and row["updated_at"]


def test_register_again_is_idempotent(api):
    register(api)
    before = list(PipelineTracking.objects.order_by("shard").values())

    body = register(api)

    assert body == {"filename": "20250101000000", "shards": [0, 1], "created": False}
    assert list(PipelineTracking.objects.order_by("shard").values()) == before


def test_register_with_more_shards_adds_only_the_missing_ones(api):
    register(api, shards=[0, 1])
    post(api, "/stages/event-ingest/done", {"filename": "20250101000000"})
    existing = {row["shard"]: row for row in PipelineTracking.objects.values()}

    body = register(api, shards=[0, 1, 2, 3])

    assert body["created"] is True and body["shards"] == [0, 1, 2, 3]
    rows = {row["shard"]: row for row in PipelineTracking.objects.values()}
    assert sorted(rows) == [0, 1, 2, 3]
    assert rows[0] == existing[0] and rows[1] == existing[1]  # untouched, still done
    assert rows[2]["event_ingest_status"] == rows[3]["event_ingest_status"] == "started"


def test_register_collapses_duplicate_shards(api):
    assert register(api, shards=[2, 2, 0])["shards"] == [0, 2]
    assert PipelineTracking.objects.count() == 2


# --- event-ingest done ------------------------------------------------------------------


def test_event_ingest_done_marks_every_shard(api):
    register(api, shards=[0, 1, 2])

    response = post(api, "/stages/event-ingest/done", {"filename": "20250101000000"})

    assert response.status_code == 200
    assert response.json() == {"filename": "20250101000000", "updated_rows": 3}
    assert set(PipelineTracking.objects.values_list("event_ingest_status", flat=True)) == {"done"}


def test_event_ingest_done_repeat_is_200_and_changes_nothing(api):
    register(api)
    post(api, "/stages/event-ingest/done", {"filename": "20250101000000"})
    before = list(PipelineTracking.objects.order_by("shard").values())

    response = post(api, "/stages/event-ingest/done", {"filename": "20250101000000"})

    assert response.status_code == 200
    assert response.json() == {"filename": "20250101000000", "updated_rows": 0}
    assert list(PipelineTracking.objects.order_by("shard").values()) == before


def test_event_ingest_done_for_unknown_file_is_404(api):
    response = post(api, "/stages/event-ingest/done", {"filename": "missing"})

    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_event_ingest_done_conflicts_when_a_shard_is_not_started(api):
    make_rows("f", [0], event_ingest_status="started")
    make_rows("f", [1], event_ingest_status="failed")

    response = post(api, "/stages/event-ingest/done", {"filename": "f"})

    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "illegal_transition"
    assert body["details"]["current_status"] == {"1": "failed"}
    assert statuses("f", 0)["event_ingest_status"] == "started"  # all or nothing


# --- stage transitions ------------------------------------------------------------------

# (status before, transition) -> expected HTTP status and status after
TRANSITION_TABLE = {
    ("new", "start"): (200, "started"),
    ("started", "start"): (200, "started"),
    ("done", "start"): (409, "done"),
    ("failed", "start"): (409, "failed"),
    ("new", "done"): (409, "new"),
    ("started", "done"): (200, "done"),
    ("done", "done"): (200, "done"),
    ("failed", "done"): (409, "failed"),
    ("new", "fail"): (200, "failed"),
    ("started", "fail"): (200, "failed"),
    ("done", "fail"): (409, "done"),
    ("failed", "fail"): (200, "failed"),
    ("new", "retry"): (200, "new"),
    ("started", "retry"): (409, "started"),
    ("done", "retry"): (409, "done"),
    ("failed", "retry"): (200, "new"),
}


@pytest.mark.parametrize("stage", list(STAGE_COLUMNS))
@pytest.mark.parametrize(("before", "transition"), list(TRANSITION_TABLE))
def test_transition_table(api, stage, before, transition):
    column = STAGE_COLUMNS[stage]
    make_rows("f", [0], **{PREVIOUS_COLUMN[stage]: "done", column: before})
    updated_at_before = statuses("f", 0)["updated_at"]
    expected_code, expected_status = TRANSITION_TABLE[(before, transition)]

    response = post(api, f"/stages/{stage}/{transition}", {"filename": "f", "shard": 0})

    assert response.status_code == expected_code, response.content
    row = statuses("f", 0)
    assert row[column] == expected_status
    if expected_code == 200:
        assert response.json() == {"filename": "f", "shard": 0, "stage": stage, "status": expected_status}
        assert (row["updated_at"] > updated_at_before) == (before != expected_status)
    else:
        body = response.json()
        assert body["code"] == "illegal_transition"
        assert body["details"]["current_status"] == before
        assert row["updated_at"] == updated_at_before


def test_transition_only_touches_its_own_stage_and_shard(api):
    make_rows("f", [0, 1], event_ingest_status="done", shard_splitter_status="done")

    post(api, "/stages/shard-worker/start", {"filename": "f", "shard": 1})

    assert statuses("f", 1)["shard_worker_status"] == "started"
    assert statuses("f", 0)["shard_worker_status"] == "new"
    assert statuses("f", 1)["shard_splitter_status"] == "done"


@pytest.mark.parametrize("stage", list(STAGE_COLUMNS))
@pytest.mark.parametrize("previous", ["new", "started", "failed"])
@pytest.mark.parametrize(("transition", "before"), [("start", "new"), ("done", "started")])
def test_start_and_done_need_the_previous_stage_done(api, stage, previous, transition, before):
    make_rows("f", [0], **{PREVIOUS_COLUMN[stage]: previous, STAGE_COLUMNS[stage]: before})

    response = post(api, f"/stages/{stage}/{transition}", {"filename": "f", "shard": 0})

    assert response.status_code == 409
    body = response.json()
    previous_stage = {
        "event_ingest_status": "event-ingest",
        "shard_splitter_status": "shard-splitter",
        "shard_worker_status": "shard-worker",
    }[PREVIOUS_COLUMN[stage]]
    assert body["code"] == "previous_stage_not_done"
    assert (body["details"]["previous_stage"], body["details"]["previous_status"]) == (previous_stage, previous)
    assert previous_stage in body["message"]
    assert statuses("f", 0)[STAGE_COLUMNS[stage]] == before  # nothing written


@pytest.mark.parametrize(
    ("transition", "before", "after"),
    [
        ("fail", "new", "failed"),
        ("fail", "started", "failed"),
        ("retry", "failed", "new"),
        ("start", "started", "started"),
    ],
)
def test_fail_retry_and_repeats_do_not_need_the_previous_stage_done(api, transition, before, after):
    make_rows("f", [0], event_ingest_status="started", shard_splitter_status=before)

    response = post(api, f"/stages/shard-splitter/{transition}", {"filename": "f", "shard": 0})

    assert response.status_code == 200 and response.json()["status"] == after


@pytest.mark.parametrize("body", [{"filename": "missing", "shard": 0}, {"filename": "f", "shard": 7}])
@pytest.mark.parametrize("transition", ["start", "done", "fail", "retry"])
def test_transition_of_unknown_row_is_404(api, body, transition):
    make_rows("f", [0])

    response = post(api, f"/stages/shard-worker/{transition}", body)

    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_full_pipeline_walk(api):
    register(api, filename="20250101000000", shards=[0, 1])
    post(api, "/stages/event-ingest/done", {"filename": "20250101000000"})
    for stage in STAGE_COLUMNS:
        queue = api.get(f"{BASE}/queues/{stage}").json()
        assert [item["shard"] for item in queue["items"]] == [0, 1]
        for shard in (0, 1):
            assert (
                post(api, f"/stages/{stage}/start", {"filename": "20250101000000", "shard": shard}).status_code == 200
            )
            assert post(api, f"/stages/{stage}/done", {"filename": "20250101000000", "shard": shard}).status_code == 200
    detail = api.get(f"{BASE}/files/20250101000000").json()
    assert all(shard["mysql_sender_status"] == "done" for shard in detail["shards"])


# --- queues -----------------------------------------------------------------------------


@pytest.mark.parametrize("stage", list(STAGE_COLUMNS))
def test_queue_lists_only_ready_rows(api, stage):
    column, previous = STAGE_COLUMNS[stage], PREVIOUS_COLUMN[stage]
    base = {"event_ingest_status": "done", "shard_splitter_status": "done", "shard_worker_status": "done"}
    make_rows("ready", [0], **{**base, previous: "done", column: "new"})
    make_rows("not-yet", [0], **{**base, previous: "started", column: "new"})
    make_rows("taken", [0], **{**base, previous: "done", column: "started"})
    make_rows("failed", [0], **{**base, previous: "done", column: "failed"})

    response = api.get(f"{BASE}/queues/{stage}")

    assert response.status_code == 200
    body = response.json()
    assert body["stage"] == stage
    assert [(item["filename"], item["shard"]) for item in body["items"]] == [("ready", 0)]
    assert set(body["items"][0]) == {"filename", "shard", "created_at"}
    assert body["items"][0]["created_at"].endswith("Z")


def test_queue_is_ordered_by_created_at_with_limit_and_offset(api):
    now = timezone.now()
    for index, name in enumerate(["c", "a", "b"]):
        make_rows(name, [0], event_ingest_status="done")
        PipelineTracking.objects.filter(filename=name).update(created_at=now - timedelta(minutes=10 - index))

    def names(query):
        return [item["filename"] for item in api.get(f"{BASE}/queues/shard-splitter{query}").json()["items"]]

    assert names("") == ["c", "a", "b"]
    assert names("?limit=2") == ["c", "a"]
    assert names("?limit=2&offset=2") == ["b"]
    assert names("?offset=5") == []


def test_queue_updated_since_filters_on_updated_at(api):
    now = timezone.now()
    make_rows("old", [0], event_ingest_status="done")
    make_rows("fresh", [0], event_ingest_status="done")
    PipelineTracking.objects.filter(filename="old").update(updated_at=now - timedelta(hours=2))

    since = (now - timedelta(hours=1)).isoformat()
    response = api.get(f"{BASE}/queues/shard-splitter", {"updated_since": since})

    assert [item["filename"] for item in response.json()["items"]] == ["fresh"]


@pytest.mark.parametrize(
    "query",
    ["limit=0", "limit=1001", "limit=x", "offset=-1", "offset=abc", "updated_since=yesterday", "limit=%00", "limt=5"],
)
def test_queue_rejects_bad_parameters(api, query):
    response = api.get(f"{BASE}/queues/shard-worker?{query}")

    assert response.status_code == 400
    assert response.json()["code"] == "validation_error"


@pytest.mark.parametrize("stage", ["event-ingest", "bogus"])
def test_queue_of_unknown_stage_is_404(api, stage):
    response = api.get(f"{BASE}/queues/{stage}")

    assert response.status_code == 404
    assert response.json()["code"] == "unknown_stage"
    assert response.json()["details"]["stages"] == list(STAGE_COLUMNS)


# --- claim ------------------------------------------------------------------------------


def test_claim_moves_ready_rows_to_started_and_returns_them(api):
    register(api, filename="f1", shards=[0, 1, 2])
    post(api, "/stages/event-ingest/done", {"filename": "f1"})

    response = post(api, "/queues/shard-splitter/claim", {"limit": 2})

    assert response.status_code == 200
    body = response.json()
    assert body["stage"] == "shard-splitter"
    assert [(item["filename"], item["shard"]) for item in body["items"]] == [("f1", 0), ("f1", 1)]
    assert [statuses("f1", shard)["shard_splitter_status"] for shard in (0, 1, 2)] == ["started", "started", "new"]

    rest = post(api, "/queues/shard-splitter/claim", {"limit": 10}).json()["items"]
    assert [(item["filename"], item["shard"]) for item in rest] == [("f1", 2)]
    assert post(api, "/queues/shard-splitter/claim", {"limit": 10}).json()["items"] == []


def test_claim_defaults_to_one_row(api):
    make_rows("f", [0, 1], event_ingest_status="done")

    assert len(post(api, "/queues/shard-splitter/claim", {}).json()["items"]) == 1


@pytest.mark.parametrize("body", [{"limit": 0}, {"limit": 1001}, {"limit": "2"}, {"limit": 1.5}, {"limit": True}, []])
def test_claim_rejects_bad_limits(api, body):
    make_rows("f", [0], event_ingest_status="done")

    response = post(api, "/queues/shard-splitter/claim", body)

    assert response.status_code == 400
    assert statuses("f", 0)["shard_splitter_status"] == "new"


# --- file detail and summary ------------------------------------------------------------


def test_file_detail_lists_shards_in_order(api):
    register(api, filename="20250101000000", shards=[1, 0])

    response = api.get(f"{BASE}/files/20250101000000")

    assert response.status_code == 200
    body = response.json()
    assert body["filename"] == "20250101000000"
    assert [shard["shard"] for shard in body["shards"]] == [0, 1]
    assert set(body["shards"][0]) == {
        "shard",
        "event_ingest_status",
        "shard_splitter_status",
        "shard_worker_status",
        "mysql_sender_status",
        "updated_at",
    }


def test_file_detail_of_unknown_file_is_404(api):
    assert api.get(f"{BASE}/files/nope").status_code == 404


def test_file_named_register_can_be_read(api):
    register(api, filename="register", shards=[0])

    response = api.get(f"{BASE}/files/register")

    assert response.status_code == 200
    assert response.json()["filename"] == "register"


@pytest.mark.parametrize("name", ["bad%0Aname", "..", "x" * 256, "tab%09"])
def test_file_detail_rejects_invalid_names(api, name):
    response = api.get(f"{BASE}/files/{name}")

    assert response.status_code == 400
    assert response.json()["code"] == "validation_error"


def test_metrics_summary(api):
    make_rows(
        "a",
        [0],
        event_ingest_status="done",
        shard_splitter_status="done",
        shard_worker_status="done",
        mysql_sender_status="done",
    )
    make_rows("b", [0], event_ingest_status="done", shard_splitter_status="failed")
    make_rows("c", [1], event_ingest_status="started")

    response = api.get(f"{BASE}/metrics/summary")

    assert response.status_code == 200
    body = response.json()
    assert body["total"] == 3
    assert set(body["by_stage"]) == {"event_ingest", "shard_splitter", "shard_worker", "mysql_sender"}
    assert body["by_stage"]["event_ingest"] == {"new": 0, "started": 1, "done": 2, "failed": 0}
    assert body["by_stage"]["shard_splitter"] == {"new": 1, "started": 0, "done": 1, "failed": 1}
    assert body["by_stage"]["mysql_sender"] == {"new": 2, "started": 0, "done": 1, "failed": 0}
    assert body["by_shard"] == [
        {"shard": 0, "total": 2, "done": 1, "failed": 1},
        {"shard": 1, "total": 1, "done": 0, "failed": 0},
    ]


def test_metrics_summary_of_empty_table(api):
    body = api.get(f"{BASE}/metrics/summary").json()

    assert body["total"] == 0
    assert body["by_stage"]["shard_worker"] == {"new": 0, "started": 0, "done": 0, "failed": 0}
    assert body["by_shard"] == []


# --- bad input: 4xx in the error shape, nothing written ---------------------------------

LONG = "x" * 256
BAD_REQUESTS = [
    # (path, raw body, expected status)
    ("/files/register", "{not json", 400),
    ("/files/register", "", 400),
    ("/files/register", "[]", 400),
    ("/files/register", '"text"', 400),
    ("/files/register", "{}", 400),
    ("/files/register", '{"filename": "f"}', 400),
    ("/files/register", '{"shards": [0]}', 400),
    ("/files/register", '{"filename": "f", "shards": []}', 400),
    ("/files/register", '{"filename": "f", "shards": "0,1"}', 400),
    ("/files/register", '{"filename": "f", "shards": [0, "1"]}', 400),
    ("/files/register", '{"filename": "f", "shards": [1.5]}', 400),
    ("/files/register", '{"filename": "f", "shards": [true]}', 400),
    ("/files/register", '{"filename": "f", "shards": [null]}', 400),
    ("/files/register", '{"filename": "f", "shards": [-1]}', 400),
    ("/files/register", '{"filename": "f", "shards": [2147483648]}', 400),
    ("/files/register", '{"filename": "f", "shards": [1e999]}', 400),
    ("/files/register", '{"filename": "f", "shards": [NaN]}', 400),
    ("/files/register", '{"filename": 20250101, "shards": [0]}', 400),
    ("/files/register", '{"filename": null, "shards": [0]}', 400),
    ("/files/register", '{"filename": "", "shards": [0]}', 400),
    ("/files/register", '{"filename": "a/b", "shards": [0]}', 400),
    ("/files/register", '{"filename": "a\\\\b", "shards": [0]}', 400),
    ("/files/register", '{"filename": "..", "shards": [0]}', 400),
    ("/files/register", '{"filename": "a\\nb", "shards": [0]}', 400),
    ("/files/register", '{"filename": "a\\u0000b", "shards": [0]}', 400),
    ("/files/register", '{"filename": "a\\u007fb", "shards": [0]}', 400),
    ("/files/register", '{"filename": "a\\ud800b", "shards": [0]}', 400),
    ("/files/register", json.dumps({"filename": LONG, "shards": [0]}), 400),
    ("/files/register", "[" * 100_000 + "]" * 100_000, 400),
    ("/files/register", json.dumps({"filename": "f", "shards": list(range(10_001))}), 400),
    ("/stages/event-ingest/done", "{}", 400),
    ("/stages/event-ingest/done", '{"filename": ["f"]}', 400),
    ("/stages/shard-worker/start", '{"filename": "f"}', 400),
    ("/stages/shard-worker/start", '{"filename": "f", "shard": "0"}', 400),
    ("/stages/shard-worker/start", '{"filename": "f", "shard": -1}', 400),
    ("/stages/shard-worker/done", '{"filename": "f/../g", "shard": 0}', 400),
    ("/stages/bogus/start", '{"filename": "f", "shard": 0}', 404),
    ("/stages/event-ingest/start", '{"filename": "f", "shard": 0}', 404),
    ("/stages/shard-worker/explode", '{"filename": "f", "shard": 0}', 404),
    ("/queues/bogus/claim", '{"limit": 1}', 404),
]


def _snapshot():
    return list(PipelineTracking.objects.order_by("id").values())


@pytest.mark.parametrize(("path", "raw", "expected"), BAD_REQUESTS)
def test_bad_input_gets_a_4xx_error_and_writes_nothing(api, path, raw, expected):
    make_rows("f", [0], event_ingest_status="done")
    before = _snapshot()

    response = api.post(f"{BASE}{path}", raw, content_type="application/json")

    assert response.status_code == expected, response.content
    body = response.json()
    assert set(body) == {"code", "message", "details"}
    assert isinstance(body["code"], str) and body["message"]
    assert _snapshot() == before


def test_validation_errors_name_the_field(api):
    response = post(api, "/files/register", {"filename": "ok", "shards": [0, -3]})

    assert response.json()["details"] == {"shards": {"1": ["Ensure this value is greater than or equal to 0."]}}


def test_wrong_content_type_is_415(api):
    response = api.post(
        f"{BASE}/files/register", "filename=f&shards=0", content_type="application/x-www-form-urlencoded"
    )

    assert response.status_code == 415
    assert response.json()["code"] == "unsupported_media_type"
    assert PipelineTracking.objects.count() == 0


def test_oversized_body_is_413(api, settings):
    settings.MAX_REQUEST_BODY_BYTES = 1000
    body = json.dumps({"filename": "f", "shards": list(range(500))})

    response = api.post(f"{BASE}/files/register", body, content_type="application/json")

    assert response.status_code == 413
    assert response.json()["code"] == "request_too_large"
    assert PipelineTracking.objects.count() == 0


def test_wrong_method_is_405_in_the_error_shape(api):
    response = api.delete(f"{BASE}/files/register")

    assert response.status_code == 405
    assert response.json()["code"] == "method_not_allowed"


# --- auth -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/queues/shard-worker"),
        ("post", "/queues/shard-worker/claim"),
        ("post", "/files/register"),
        ("get", "/files/f"),
        ("get", "/metrics/summary"),
        ("post", "/stages/event-ingest/done"),
        ("post", "/stages/shard-worker/start"),
    ],
)
def test_every_endpoint_requires_a_token(anonymous, method, path):
    response = getattr(anonymous, method)(f"{BASE}{path}", {}, format="json")

    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Bearer"
    assert response.json()["code"] == "not_authenticated"
    assert PipelineTracking.objects.count() == 0
