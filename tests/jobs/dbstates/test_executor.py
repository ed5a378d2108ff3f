import psycopg
import pytest

from jobs.dbstates import statefs
from jobs.dbstates.models import Instance, PrepareEvent, State
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.jobs.dbstates.helpers import engine_worker, prepare, wait_terminal

pytestmark = ALL_DATABASES_COMMITTED


def test_prepare_from_a_file_builds_a_state_and_starts_an_instance(tmp_path):
    script = tmp_path / "schema.sql"
    script.write_text("CREATE TABLE t (a int); INSERT INTO t SELECT generate_series(1, 100);\n")
    with engine_worker():
        job = wait_terminal(prepare(script).job_id)
    assert job.status == "succeeded", job.error
    result = job.result
    with psycopg.connect(result["dsn"]) as conn:
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (100,)
    state = State.objects.get(state_id=result["state_id"])
    assert statefs.is_complete(statefs.root() / "engines/postgres" / state.engine_version / "states" / state.state_id, statefs.BUILD_MARKER)
    assert Instance.objects.get(instance_id=result["instance_id"]).port
    types = list(PrepareEvent.objects.filter(job_id=job.job_id).values_list("type", "status", "task_id"))
    assert types[0] == ("status", "queued", "") and types[-1] == ("status", "succeeded", "")
    assert ("log", "", "execute-0") in types
