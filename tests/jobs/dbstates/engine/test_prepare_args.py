"""psql argument normalization and sqlrs's ids: deterministic, content-addressed, path-independent."""

import pytest

from jobs.dbstates.engine import prepare_args
from pipeline_project.api.errors import InvalidInputError


@pytest.fixture(autouse=True)
def roots(settings, tmp_path):
    settings.SQLRS_SCRIPT_ROOTS = [str(tmp_path)]


def test_defaults_come_first_and_options_apply_to_every_step(tmp_path):
    script = tmp_path / "a.sql"
    request = prepare_args.psql_request_normalize(
        psql_args=["--single-transaction", "-f", str(script), "-v", "x=1", "-c", "SELECT 1", "-X"], stdin=None
    )

    assert request.options == ["-X", "-v", "ON_ERROR_STOP=1", "-1", "-v", "x=1"]
    assert [step.kind for step in request.steps] == ["file", "command"]
    assert request.normalized == f"-X -v ON_ERROR_STOP=1 -1 -v x=1 -f {script} -c 'SELECT 1'"


def test_ids_follow_content_not_paths(tmp_path):
    (tmp_path / "one.sql").write_text("CREATE TABLE t (a int);")
    (tmp_path / "two.sql").write_text("CREATE TABLE t (a int);")
    (tmp_path / "three.sql").write_text("CREATE TABLE t (b int);")

    def chain(name, image="postgres:15.1@sha256:ab"):
        request = prepare_args.psql_request_normalize(psql_args=["-f", str(tmp_path / name)], stdin=None)
        hashes = [prepare_args.task_hash(request, step) for step in request.steps]
        return prepare_args.chain(request.steps, hashes, resolved_image_id=image)

    assert chain("one.sql") == chain("one.sql")
    assert chain("one.sql")[0].output_state_id == chain("two.sql")[0].output_state_id
    assert chain("one.sql")[0].output_state_id != chain("three.sql")[0].output_state_id
    other_image = chain("one.sql", image="postgres:16.1@sha256:cd")
    assert other_image[0].task_hash == chain("one.sql")[0].task_hash
    assert other_image[0].output_state_id != chain("one.sql")[0].output_state_id


def test_the_digest_keeps_parts_apart():
    assert prepare_args.digest(("a", "bc")) != prepare_args.digest(("a", "b"), ("c", ""))
    assert prepare_args.digest(("k", "v")) == prepare_args.digest(("k", "v"))


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (["-p5432", "-c", "SELECT 1"], None, "connection flag"),
        (["--username=x", "-c", "SELECT 1"], None, "connection flag"),
        (["-W", "-c", "SELECT 1"], None, "connection flag"),
        (["-o", "/tmp/out", "-c", "SELECT 1"], None, "not supported"),
        (["-f", "/etc/passwd"], None, "outside the directories"),
        (["-f", "-", "-f", "-"], "x", "once"),
        (["-c"], None, "needs a value"),
        (["-v", "novalue", "-c", "SELECT 1"], None, "NAME=VALUE"),
        ([], None, "no script"),
        (["-c", "SELECT 1"], "\x00", "without NUL"),
    ],
)
def test_bad_arguments_are_invalid(args, stdin, message):
    with pytest.raises(InvalidInputError, match=message) as raised:
        prepare_args.psql_request_normalize(psql_args=args, stdin=stdin)
    assert raised.value.code == "invalid_argument"


def test_a_symlink_cannot_lead_out_of_the_script_roots(tmp_path):
    (tmp_path / "link.sql").symlink_to("/etc/hostname")
    with pytest.raises(InvalidInputError, match="outside"):
        prepare_args.psql_request_normalize(psql_args=["-f", str(tmp_path / "link.sql")], stdin=None)
