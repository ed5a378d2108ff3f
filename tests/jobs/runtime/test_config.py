"""The worker's configuration: WORKERS_JSON and the --queue/--namespace flags, through one parser."""

import pytest

from jobs.queue.worker.clocks import QueueClocks
from jobs.runtime.config import WorkerConfig, parse_workers, parse_workers_json, worker_flag_entry


def test_workers_json_parsing():
    workers = parse_workers_json(
        '[{"queue": "load.cbr", "concurrency": 2}, {"queue": "load.sgx"}, {"namespace": "orders", "concurrency": 10}]'
    )
    assert workers.served("queue") == {"load.cbr": 2, "load.sgx": 1}
    assert workers.served("namespace") == {"orders": 10}
    for bad in [
        "{}",
        "[]",
        '[{"concurrency": 2}]',
        '[{"queue": "q", "concurrency": 0}]',
        '[{"queue": "q", "concurrency": "2"}]',
        '[{"queue": "q", "concurrency": 1001}]',
        '[{"queue": "q", "concurrency": 600}, {"queue": "q", "concurrency": 600}]',
        '[{"queue": "a queue"}]',
        '[{"queue": "q", "concurency": 2}]',
        '[{"queue": "q", "namespace": "n"}]',
        '[{"namespace": "n", "concurrency": 0}]',
        "nope",
    ]:
        with pytest.raises(ValueError):
            parse_workers_json(bad)


def test_queue_flags_have_the_same_bounds():
    flags = ["a", "b:3", "b:2", "load:eu:4"]
    assert parse_workers([worker_flag_entry("queue", flag) for flag in flags]).served("queue") == {
        "a": 1,
        "b": 5,
        "load:eu": 4,
    }
    assert parse_workers([worker_flag_entry("namespace", "orders:10")]).served("namespace") == {"orders": 10}
    for bad in ["a:00", "a:0", "a:", "a:²", "a:+1", "a:1001", " :2", "a b:2", "a:eu"]:
        for kind in ("queue", "namespace"):
            with pytest.raises(ValueError):
                parse_workers([worker_flag_entry(kind, bad)])


def test_the_configuration_serves_queues_namespaces_and_other_kinds(settings):
    settings.DL_HEARTBEAT_SEC = 7
    config = WorkerConfig.from_settings({"queue": {"a": 2}, "namespace": {"n": 1}, "topic": {"t": 3}}, run_reaper=False)

    assert config.serves == {"queue": {"a": 2}, "namespace": {"n": 1}, "topic": {"t": 3}}
    assert (config.served("queue"), config.served("namespace")) == ({"a": 2}, {"n": 1})
    assert (config.settings_of(QueueClocks).heartbeat_sec, config.run_reaper) == (7, False)


def test_a_kind_s_settings_are_overridden_by_name_and_a_misspelt_one_is_refused():
    config = WorkerConfig.from_settings({}, heartbeat_sec=0.5, sweep_sec=3.0)

    assert (config.settings_of(QueueClocks).heartbeat_sec, config.sweep_sec) == (0.5, 3.0)
    with pytest.raises(TypeError, match="heartbeat_secs"):
        WorkerConfig.from_settings({}, heartbeat_secs=0.5)
