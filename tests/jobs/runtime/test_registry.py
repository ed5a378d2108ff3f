"""One registry of what the runtime runs: every app's periodic tasks in every role, work sources by
kind (a new kind needs no change to the runtime), and the checks a worker passes at start."""

import pytest

import tests.jobs.processes.processors  # noqa: F401  (the test.* namespaces)
from jobs.processes.worker.source import NamespaceSource
from jobs.queue.handlers import registry as handlers
from jobs.queue.worker.source import QueueSource
from jobs.runtime import registry
from jobs.runtime.build import build_reaper, build_worker
from jobs.runtime.config import WorkerConfig, parse_workers_json
from jobs.runtime.periodic import PeriodicWork
from tests.conftest import ALL_DATABASES
from tests.jobs.helpers import FAST

HOUSEKEEPING = {
    "jobs.reap",
    "jobs.dead_workers",
    "jobs.forget_workers",
    "jobs.retention",
    "jobs.statistics",
    "jobs.vacuum",
    "jobs.counts",
    "jobs.throughput",
    "jobs.throughput_age",
    "processes.zombies",
    "ingestion.settle",
    "sqlrs.jobs_reconcile",
    "schedules.enqueue",
}
ENGINE_LOCAL = {"sqlrs.cache_evict", "sqlrs.job_dirs_sweep", "sqlrs.states_sync"}


def names(tasks) -> set[str]:
    return {task.name for task in tasks}


def config(serves=None, **overrides) -> WorkerConfig:
    return WorkerConfig.from_settings(serves or {}, **{**FAST, **overrides})


def test_every_apps_periodic_tasks_are_registered_the_same_way():
    everything = registry.periodic_for(config(), served={"queue": {"sqlrs": 1}}, housekeeping=True)

    assert names(everything) == HOUSEKEEPING | ENGINE_LOCAL
    assert {task.local_to for task in everything if task.name in ENGINE_LOCAL} == {("queue", "sqlrs")}


@pytest.mark.parametrize(
    ("served", "housekeeping", "expected"),
    [
        ({}, True, HOUSEKEEPING),  # runreaper
        ({"queue": {"default": 4}}, True, HOUSEKEEPING),  # runworker
        ({"namespace": {"orders": 2}}, True, HOUSEKEEPING),  # a worker serving namespaces only
        ({"queue": {"default": 4}}, False, set()),  # runworker --no-reaper
        ({"queue": {"default": 4, "sqlrs": 2}}, True, HOUSEKEEPING | ENGINE_LOCAL),  # make run's worker
        ({"queue": {"sqlrs": 2}}, False, ENGINE_LOCAL),  # the engine's worker, --no-reaper
    ],
)
def test_which_periodic_tasks_each_role_runs(served, housekeeping, expected):
    assert names(registry.periodic_for(config(), served=served, housekeeping=housekeeping)) == expected


def test_periods_follow_the_configuration_of_the_moment(settings):
    settings.INGESTION_SETTLE_PERIOD_SEC = 0.7
    tasks = registry.periodic_for(config(reaper_period_sec=0.3), served={}, housekeeping=True)
    periods = {task.name: task.period_sec for task in tasks}

    assert (periods["jobs.reap"], periods["ingestion.settle"]) == (0.3, 0.7)


def test_runreaper_runs_every_housekeeping_task():
    assert names(build_reaper(config()).tasks) == HOUSEKEEPING


@pytest.mark.parametrize(("run_reaper", "expected"), [(True, HOUSEKEEPING), (False, None)])
def test_runworker_builds_its_sources_and_periodic_tasks_from_the_registry(run_reaper, expected):
    worker = build_worker(
        config({"queue": {"default": 2}, "namespace": {"test.quick": 1}}, run_reaper=run_reaper), handlers
    )

    assert [type(source) for source in worker.sources] == [QueueSource, NamespaceSource]
    assert (names(worker._periodic.tasks) if worker._periodic else None) == expected


@pytest.fixture
def new_kind():
    """A kind of work source an app adds: registered, nothing else changed."""
    built = []

    @registry.work_source("test.kind")
    class Echoes:
        channels = ()

        @classmethod
        def build(cls, names, setup):
            built.append((names, setup.name))
            return cls()

        @staticmethod
        def name_problem(name):
            return None

    @registry.periodic_tasks
    def echoes_tasks(config):
        return [PeriodicWork("test.kind.tidy", 1.0, dict, local_to=("test.kind", "echo"))]

    yield built
    del registry._sources["test.kind"]
    registry._periodic.remove(echoes_tasks)


def test_a_new_kind_of_source_is_served_by_registering_it(new_kind):
    workers = parse_workers_json('[{"test.kind": "echo", "concurrency": 3}, {"queue": "default"}]')
    worker = build_worker(config(workers.serves, run_reaper=False), handlers)

    assert workers.serves == {"test.kind": {"echo": 3}, "queue": {"default": 1}}
    queue, echoes = worker.sources
    assert type(queue) is QueueSource and type(echoes).__name__ == "Echoes"
    assert new_kind == [({"echo": 3}, queue.worker_name)]  # built as the worker it serves in
    assert names(worker._periodic.tasks) == {"test.kind.tidy"}  # local to it: run where it is served


def test_a_kind_nobody_registered_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match=r'each entry is \{"namespace" or "queue": NAME'):
        parse_workers_json('[{"topic": "t", "concurrency": 1}]')
    with pytest.raises(LookupError, match="no work source of kind 'topic' is registered"):
        build_worker(config({"topic": {"t": 1}}), handlers)


@pytest.fixture
def refusing_check():
    def refuse(served):
        if "refused" in served.get("queue", {}):
            raise registry.StartRefused("not on this host")

    registry.start_check(refuse)
    yield
    registry._start_checks.remove(refuse)


@ALL_DATABASES
def test_a_start_check_refuses_a_worker_before_anything_starts(refusing_check):
    with pytest.raises(registry.StartRefused, match="not on this host"):
        build_worker(config({"queue": {"refused": 1}}), handlers)
    assert build_worker(config({"queue": {"default": 1}}), handlers).sources


@pytest.fixture
def exit_hooks():
    """Two exit hooks an app adds, the first failing; yields what they were called with."""
    called = []

    def failing(*, deadline):
        called.append(("failing", deadline))
        raise RuntimeError("broken hook")

    def last(*, deadline):
        called.append(("last", deadline))

    for hook in (failing, last):
        registry.at_exit(hook)
    registry.at_exit(last)  # registering twice is harmless
    yield called
    registry._exit_hooks.remove(failing)
    registry._exit_hooks.remove(last)


def test_exit_hooks_run_in_turn_with_the_deadline_and_one_failing_stops_none_after_it(exit_hooks, caplog):
    with caplog.at_level("ERROR", logger="jobs.runtime"):
        registry.run_exit_hooks(deadline=123.0)

    assert exit_hooks == [("failing", 123.0), ("last", 123.0)]
    assert [record.message for record in caplog.records] == ["an exit hook failed"]
