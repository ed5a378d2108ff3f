"""jobs.queue.states: the queue's statuses have one home, and the services move jobs only as its
TRANSITIONS table allows.

The rule for literals: the queue's status words are spelled only in ``jobs/queue/states.py``.
Found elsewhere, as the queue's statuses:

* in SQL text (a string that is not a docstring): a quoted status, ``'running'``, in every module of
  ``jobs/queue``, and in any other module's strings that name a queue table (``dl_jobs``,
  ``dl_job_events``, ``dl_job_counts``, ``dl_job_dependencies``);
* in Python: a status word (or "waiting", the shown status) compared (``==``, ``in``), in a tuple
  or set, returned, given to a keyword named like ``status``/``kind``/``default``, or assigned to
  a name like ``status``: in every module of ``jobs/queue``, and in other modules only in a
  statement that uses a name imported from ``jobs.queue`` (other systems' own statuses — tracking's,
  processes', ingestion's, dbstates' prepare jobs' — are theirs to spell).

Event kinds and outcome kinds spelled like statuses ('failed', 'canceled', ...) count too: they
are named through ``states.EventKind`` and ``states.OutcomeKind``.
"""

import ast
import re
import textwrap
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection

from jobs.queue import services, states
from jobs.queue.models import Job
from jobs.queue.services import Outcome, Selection
from jobs.queue.states import TRANSITIONS, JobStatus
from tests.conftest import ALL_DATABASES
from tests.jobs.conftest import enqueue, job

ROOT = Path(__file__).resolve().parents[3]
SERVICE_DIRS = ("jobs", "ingestion", "tracking", "pipeline_project")
SKIPPED_DIRS = {"migrations", "tests", "bench", "__pycache__"}
HOME = "jobs/queue/states.py"
QUEUE_PACKAGE = "jobs/queue/"
STATUS_WORDS = frozenset(JobStatus.values)
PYTHON_WORDS = STATUS_WORDS | {states.WAITING}
SQL_STATUS = re.compile(r"'(" + "|".join(sorted(STATUS_WORDS)) + r")'")
QUEUE_TABLES = re.compile(r"\bdl_job(s|_events|_counts|_dependencies)\b")
STATUS_KEYWORDS = re.compile(r"status|^kind$|^default$|^db_default$")


def _docstrings(tree: ast.AST) -> set[int]:
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
    }


def _queue_names(tree: ast.AST) -> set[str]:
    """Names a module imported from jobs.queue."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("jobs.queue"):
            names.update(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(
                (alias.asname or alias.name).split(".")[0]
                for alias in node.names
                if alias.name.startswith("jobs.queue")
            )
    return names


def _used_as_status(node: ast.Constant, parents: dict) -> bool:
    parent = parents.get(id(node))
    if isinstance(parent, ast.Compare):
        return True
    if isinstance(parent, ast.Tuple | ast.Set):
        return node.value in STATUS_WORDS  # a set of statuses ("waiting" is a field name as often)
    if isinstance(parent, ast.keyword):
        return bool(parent.arg and STATUS_KEYWORDS.search(parent.arg))
    if isinstance(parent, ast.IfExp):
        parent = parents.get(id(parent))
    if isinstance(parent, ast.Return):
        return True
    if isinstance(parent, ast.Assign | ast.AnnAssign):
        targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
        return any("status" in ast.unparse(target).lower() for target in targets)
    return False


def _statement_of(node: ast.AST, parents: dict) -> ast.AST:
    while not isinstance(node, ast.stmt) and id(node) in parents:
        node = parents[id(node)]
    return node


def literal_findings(source: str, path: str) -> list[str]:
    """``path:line: literal`` for each queue status literal the rule finds in one module."""
    tree = ast.parse(source)
    in_queue = path.startswith(QUEUE_PACKAGE)
    docstrings = _docstrings(tree)
    queue_names = _queue_names(tree)
    parents = {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        # SQL text: a whole string (an f-string's text parts together), never a docstring.
        if isinstance(node, ast.JoinedStr) or (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and not isinstance(parents.get(id(node)), ast.JoinedStr)
        ):
            if id(node) in docstrings:
                continue
            parts = node.values if isinstance(node, ast.JoinedStr) else [node]
            text = "".join(part.value for part in parts if isinstance(part, ast.Constant))
            if in_queue or QUEUE_TABLES.search(text):
                found += [f"{path}:{node.lineno}: {match.group()}" for match in SQL_STATUS.finditer(text)]
        # Python: a status word used as one.
        if isinstance(node, ast.Constant) and node.value in PYTHON_WORDS and _used_as_status(node, parents):
            statement = _statement_of(node, parents)
            if in_queue or any(isinstance(name, ast.Name) and name.id in queue_names for name in ast.walk(statement)):
                found.append(f'{path}:{node.lineno}: "{node.value}"')
    return found


def tree_findings(root: Path) -> list[str]:
    found = []
    for directory in SERVICE_DIRS:
        for module in sorted((root / directory).rglob("*.py")):
            path = module.relative_to(root).as_posix()
            if SKIPPED_DIRS.intersection(module.relative_to(root).parts) or path == HOME:
                continue
            found += literal_findings(module.read_text(), path)
    return found


def test_no_queue_status_literal_outside_states():
    found = list(tree_findings(ROOT))
    assert not found, "Queue status literals outside jobs/queue/states.py (name them from there):\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("path", "source", "expected"),
    [
        # The queue's own modules: SQL and Python.
        ("jobs/queue/x.py", "Q = \"SELECT 1 FROM dl_jobs WHERE status = 'queued'\"", ["jobs/queue/x.py:1: 'queued'"]),
        ("jobs/queue/x.py", 'Q = f"""\nUPDATE t SET status = \'lost\', x = {y}\n"""', ["jobs/queue/x.py:1: 'lost'"]),
        ("jobs/queue/x.py", 'def f(job):\n    return job.status == "failed"', ['jobs/queue/x.py:2: "failed"']),
        ("jobs/queue/x.py", 'ENDS = {"requeue", "canceled"}', ['jobs/queue/x.py:1: "canceled"']),
        ("jobs/queue/x.py", 'Job.objects.filter(status="running")', ['jobs/queue/x.py:1: "running"']),
        ("jobs/queue/x.py", 'def f(s):\n    return "waiting" if s else s', ['jobs/queue/x.py:2: "waiting"']),
        # Not statuses: docstrings, dict keys, messages, field lists.
        ("jobs/queue/x.py", 'def f():\n    """Guarded by ``status = \'running\'``."""', []),
        ("jobs/queue/x.py", 'C = {"succeeded": 0, "failed": 0}\nF = ["status", "waiting"]\nm(skipped="running")', []),
        # Other systems: their own statuses are theirs; a queue table's or the queue's names are not.
        ("tracking/x.py", "Q = \"UPDATE pipeline_tracking SET s = 'done' WHERE s = 'failed'\"", []),
        ("jobs/dbstates/x.py", 'class S(TextChoices):\n    RUNNING = "running"\nif job.status == "running": pass', []),
        ("ingestion/x.py", "Q = \"SELECT 1 FROM dl_jobs WHERE status = 'failed'\"", ["ingestion/x.py:1: 'failed'"]),
        (
            "ingestion/x.py",
            'from jobs.queue.selectors import jobs_with_args\njobs_with_args(statuses=("queued", "running"))',
            ['ingestion/x.py:2: "queued"', 'ingestion/x.py:2: "running"'],
        ),
        ("ingestion/x.py", 'from jobs.queue import services\nItem.objects.filter(status="failed")', []),
    ],
)
def test_the_literal_rule(path, source, expected):
    assert literal_findings(textwrap.dedent(source), path) == expected


# --- the table -----------------------------------------------------------------------------


def test_every_status_is_reached_and_only_succeeded_is_never_left():
    targets = {rule.target for rule in TRANSITIONS.values()}
    sources = set().union(*(rule.sources for rule in TRANSITIONS.values()))
    assert targets == set(JobStatus)
    assert set(JobStatus) - sources == {JobStatus.SUCCEEDED}
    assert [name for name, rule in TRANSITIONS.items() if not rule.sources] == ["enqueue"]


def test_finished_jobs_are_moved_only_by_an_operator_or_dependencies():
    for name, rule in TRANSITIONS.items():
        if rule.sources & set(states.FINISHED):
            assert rule.by in (states.OPERATOR, states.DEPENDENCIES), name


def test_the_sets_and_fragments_come_from_the_table_in_the_enums_order():
    assert states.RETRYABLE == (JobStatus.FAILED, JobStatus.CANCELED, JobStatus.LOST)
    assert states.LIVE == (JobStatus.QUEUED, JobStatus.RUNNING) == (*states.CLAIMABLE, *states.STOPPABLE)
    assert (JobStatus.SUCCEEDED, *states.UNSUCCESSFUL) == states.FINISHED
    # The text the services, the trigger functions and the migrations hold.
    assert states.FINISHED_SQL == "('succeeded', 'failed', 'canceled', 'lost')"
    assert states.RETRYABLE_SQL == states.UNSUCCESSFUL_SQL == "('failed', 'canceled', 'lost')"
    assert states.LIVE_SQL == "('queued', 'running')"
    assert states.is_waiting_sql("j") == (
        "j.status = 'queued' AND j.available_at = '9999-12-31 00:00:00+00'::timestamptz"
    )
    with pytest.raises(ValueError):
        states.sql_literal("started")  # tracking's, not the queue's


def test_allowed_reads_the_table():
    assert states.allowed(None, JobStatus.QUEUED)
    assert states.allowed(JobStatus.QUEUED, JobStatus.RUNNING)
    assert not states.allowed(JobStatus.RUNNING, JobStatus.RUNNING)
    assert not states.allowed(JobStatus.SUCCEEDED, JobStatus.QUEUED)  # a succeeded job is never retried
    assert not states.allowed(None, JobStatus.RUNNING)


# --- the services follow the table ---------------------------------------------------------


def _job_in(status: str) -> uuid.UUID:
    job_id = enqueue(task="test.echo").job_id
    Job.objects.filter(job_id=job_id).update(status=status)
    return job_id


@ALL_DATABASES
@pytest.mark.parametrize("status", JobStatus.values)
def test_an_operator_retry_moves_what_the_table_allows(status):
    job_id = _job_in(status)
    rule = TRANSITIONS["retry"]
    counts = services.jobs_retry(selection=Selection.of_ids([job_id]), by="test")
    assert counts.changed == (status in rule.sources)
    assert job(job_id).status == (rule.target if status in rule.sources else status)


@ALL_DATABASES
def test_an_operator_retry_of_a_running_job_is_refused():
    assert JobStatus.RUNNING not in TRANSITIONS["retry"].sources
    job_id = _job_in(JobStatus.RUNNING)
    assert services.job_retry(job_id=job_id, requested_by="test") is False
    assert job(job_id).status == JobStatus.RUNNING


@ALL_DATABASES
@pytest.mark.parametrize("status", JobStatus.values)
def test_an_operator_cancel_moves_what_the_table_allows(status):
    job_id = _job_in(status)
    counts = services.jobs_cancel(selection=Selection.of_ids([job_id]), by="test")
    found = job(job_id)
    if status in TRANSITIONS["cancel"].sources:
        assert (counts.changed, found.status) == (1, TRANSITIONS["cancel"].target)
    elif status in TRANSITIONS["stop"].sources:  # asked to stop: its run's outcome moves it
        assert (counts.requested, found.status, found.cancel_requested) == (1, status, True)
    else:
        assert (counts.skipped, found.status) == (1, status)


RECORD_TRANSITIONS = """
    CREATE TABLE st_transitions (source text, target text);
    CREATE FUNCTION st_record() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'INSERT' THEN
            INSERT INTO st_transitions VALUES (NULL, NEW.status::text);
        ELSIF OLD.status IS DISTINCT FROM NEW.status THEN
            INSERT INTO st_transitions VALUES (OLD.status::text, NEW.status::text);
        END IF;
        RETURN NULL;
    END $$;
    CREATE TRIGGER st_record AFTER INSERT OR UPDATE ON dl_jobs FOR EACH ROW EXECUTE FUNCTION st_record();
"""


def _claim(queue: str):
    [claimed] = services.jobs_claim(queue=queue, limit=1, worker_id="test")
    return claimed


def _end(claimed, kind: str) -> str:
    return services.jobs_complete(outcomes=[Outcome(lease=claimed.lease, kind=kind, error="x")], worker_id="test")[
        claimed.lease.job_id
    ]


@ALL_DATABASES
def test_every_status_change_the_services_make_is_in_the_table():
    """Each path once (in one transaction: the recording trigger goes with it): every change a
    row goes through is one the table allows."""
    with connection.cursor() as cursor:
        cursor.execute(RECORD_TRANSITIONS)
    for kind, attempts, expected in [("succeeded", 5, "succeeded"), ("error", 5, "queued"), ("error", 1, "failed")]:
        queue = f"st-{uuid.uuid4().hex[:8]}"
        enqueue(task="test.echo", queue=queue, max_attempts=attempts)
        assert _end(_claim(queue), kind) == expected
    queue = f"st-{uuid.uuid4().hex[:8]}"
    stopped = enqueue(task="test.echo", queue=queue).job_id
    assert _end(_claim(queue), "canceled") == "canceled"
    services.jobs_retry(selection=Selection.of_ids([stopped]), by="test")
    services.jobs_release(leases=[_claim(queue).lease], worker_id="test", reason="worker_shutdown")
    for attempts in (1, 5):  # reaped: lost, then queued
        queue = f"st-{uuid.uuid4().hex[:8]}"
        reaped = enqueue(task="test.echo", queue=queue, max_attempts=attempts).job_id
        _claim(queue)
        Job.objects.filter(job_id=reaped).update(lease_expires_at=job(reaped).started_at - timedelta(seconds=1))
        services.jobs_reap()
    services.jobs_cancel(selection=Selection.of_ids([enqueue(task="test.echo").job_id]), by="test")
    # Dependencies: the upstream job fails, its dependent is canceled; retried, it waits again.
    queue = f"st-{uuid.uuid4().hex[:8]}"
    upstream = enqueue(task="test.echo", queue=queue, max_attempts=1).job_id
    dependent = enqueue(task="test.echo", queue=f"{queue}-down", depends_on=[upstream]).job_id
    _end(_claim(queue), "fatal")
    assert job(dependent).status == JobStatus.CANCELED
    services.jobs_retry(selection=Selection.of_ids([upstream]), by="test")
    assert job(dependent).status == JobStatus.QUEUED
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT source, target FROM st_transitions")
        seen = set(cursor.fetchall())
    assert {(source, target) for source, target in seen if not states.allowed(source, target)} == set()
    # Every transition of the table but the claim's set-aside (a refusal of the database) was made.
    made = {
        name
        for name, rule in TRANSITIONS.items()
        for source, target in seen
        if target == rule.target and (source in rule.sources if rule.sources else source is None)
    }
    assert set(TRANSITIONS) - made <= {"set_aside"}
