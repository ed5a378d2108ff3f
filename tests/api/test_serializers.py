"""Request bodies with fields nobody declared are refused, naming them."""

import pytest

from tests.conftest import ALL_DATABASES

pytestmark = ALL_DATABASES


@pytest.mark.parametrize(
    ("path", "body", "unknown"),
    [
        ("/api/v1/jobs/trigger", {"queue": "q", "task": "t", "lock_key": "k", "priorty": 1}, "priorty"),
        ("/api/v1/jobs/trigger/bulk", {"jobs": [{"queue": "q", "task": "t", "lock_key": "k", "arg": {}}]}, "arg"),
        ("/api/v1/jobs/trigger/bulk", {"jobs": [], "extra": 1}, "extra"),
        ("/api/v1/pipeline/files/register", {"filename": "f", "shards": [0], "shard": 1}, "shard"),
        ("/api/v1/pipeline/stages/shard-splitter/start", {"filename": "f", "shard": 0, "force": True}, "force"),
        ("/api/v1/pipeline/queues/shard-worker/claim", {"limit": 1, "limt": 2}, "limt"),
    ],
)
def test_unknown_body_fields_are_named_in_a_400(api, path, body, unknown):
    response = api.post(path, body, format="json")

    assert response.status_code == 400
    assert unknown in str(response.json()["details"])
