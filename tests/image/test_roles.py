"""Every role of the shipped image, run as a deployment runs it (tests/image/helpers.py), against
the machine's PostgreSQL. Built and run by CI's image step (`make test-image`)."""

import functools
import json
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.helpers import free_port, wait_for
from tests.image.helpers import (
    ENGINE_IMAGE,
    IMAGE,
    fresh_databases,
    http,
    podman,
    run,
    start,
)

pytestmark = [pytest.mark.image, pytest.mark.slow]

STOP_TIMEOUT_SEC = 10  # a container runtime's default: every role must end well within it
SIZE_BUDGET_MB = 400  # 392 MB at 0.1.0 (Debian trixie, Python 3.13, Tesseract, poppler, the venv)


class Deployment:
    def __init__(self, databases, migrations):
        self.databases = databases
        self.migrations = migrations
        self.web_port, self.probe_port = free_port(), free_port()
        self.env = {**databases.env, "SECRET_KEY": uuid.uuid4().hex}
        self.containers = []

    def start(self, role_args, *, env=None, **options):
        container = start(role_args, env={**self.env, **(env or {})}, **options)
        self.containers.append(container)
        return container

    def url(self, path: str, *, probe: bool = False) -> str:
        return f"http://127.0.0.1:{self.probe_port if probe else self.web_port}{path}"

    @functools.cached_property
    def token(self) -> str:
        return self.web.exec("python", "manage.py", "apitoken", "create", "image-tests").stdout.split()[-1]

    def trigger(self, token: str, **job) -> str:
        status, body = http(
            self.url("/api/v1/jobs/trigger"),
            method="POST",
            headers={"Authorization": f"Bearer {token}"},
            body={"lock_key": uuid.uuid4().hex, **job},
        )
        assert status == 201, body
        return body["job_id"]

    def job_status(self, job_id: str) -> str:
        return self.databases.query("SELECT status FROM dl_jobs WHERE job_id = %s", (job_id,))[0][0]


@pytest.fixture(scope="module")
def deployment():
    with fresh_databases() as databases:
        env = {**databases.env, "SECRET_KEY": "migrate-only"}
        with ThreadPoolExecutor(2) as pool:  # two migrations at once on a database nobody made
            migrations = list(pool.map(lambda _: run(["migrate"], env=env), range(2)))
        deployed = Deployment(databases, migrations)
        try:
            web_env = {
                "WEB_BIND": f"127.0.0.1:{deployed.web_port}",
                "WEB_PROBE_BIND": f"127.0.0.1:{deployed.probe_port}",
            }
            deployed.web = deployed.start(["web"], env=web_env)
            deployed.worker = deployed.start(
                ["worker", "--no-reaper"], env={"WORKERS_JSON": '[{"queue": "default", "concurrency": 4}]'}
            )
            deployed.reaper = deployed.start(["reaper"])
            wait_for(
                lambda: (
                    http(deployed.url("/health"))[0] == 200
                    if deployed.web.running
                    else pytest.fail(deployed.web.logs())
                ),
                timeout=60,
                what="web did not answer /health",
            )
            yield deployed
        finally:
            for container in deployed.containers:
                container.remove()


def test_two_migrations_at_once_on_a_fresh_database_both_succeed(deployment):
    for code, output in deployment.migrations:
        assert code == 0, output[-3000:]
    assert sum("waiting for it" in output for _, output in deployment.migrations) == 1
    assert any("No migrations to apply" in output for _, output in deployment.migrations)


def test_web_answers_probes_whatever_the_host_and_the_probe_port_needs_no_token(deployment):
    pod_address = {"Host": "10.42.0.17:8000"}  # what a Kubernetes httpGet probe sends

    assert http(deployment.url("/health"), headers=pod_address)[0] == 200
    for path in ("/health", "/status", "/metrics"):
        status, body = http(deployment.url(path, probe=True), headers=pod_address)
        assert status == 200, (path, body)
    assert "dl_queue_depth" in http(deployment.url("/metrics", probe=True))[1]
    assert http(deployment.url("/status"))[0] == 401  # the users' port still asks for a token
    assert http(deployment.url("/admin/", probe=True))[0] == 404  # the probe port serves only the probes
    assert http(deployment.url("/status", probe=True), method="POST", body={})[0] == 405


def test_a_job_triggered_through_the_api_is_run_by_the_worker_container(deployment):
    job_id = deployment.trigger(deployment.token, queue="default", task="jobs.noop")

    wait_for(lambda: deployment.job_status(job_id) == "succeeded", timeout=30, what="the worker did not run the job")


def test_every_role_stays_up_and_passes_the_images_health_check(deployment):
    wait_for(
        lambda: deployment.databases.query("SELECT count(*) FROM dl_workers")[0][0] >= 1,
        timeout=30,
        what="the worker never registered",
    )
    time.sleep(2)  # the reaper's first pass
    for container in (deployment.web, deployment.worker, deployment.reaper):
        started = time.monotonic()
        result = podman("healthcheck", "run", container.name, check=False)
        took = time.monotonic() - started
        assert result.returncode == 0, (container.name, result.stdout, result.stderr, container.logs()[-2000:])
        assert took < 5, f"{container.name}'s health check took {took:.1f} s"
        assert container.running


def test_every_process_runs_as_a_non_root_user(deployment):
    for container in (deployment.web, deployment.worker, deployment.reaper):
        users = podman("top", container.name, "huser").stdout.split()[1:]
        assert users and "root" not in users and "0" not in users, (container.name, users)


def test_the_root_filesystem_is_read_only_and_var_is_writable(deployment):
    assert deployment.worker.exec("touch", "/app/manage.py", check=False).returncode != 0
    assert deployment.worker.exec("touch", "/app/var/ingestion/probe").returncode == 0


def test_no_metrics_files_pile_up(deployment):
    for _ in range(3):  # the worker's health check, every 15 s in production
        deployment.worker.exec("python", "manage.py", "workerhealth")
    assert deployment.worker.exec("ls", "-A", "/tmp").stdout.split() == []

    # A web worker that dies takes its live gauges with it; gunicorn starts another.
    master = next(
        pid
        for pid, ppid, args in _processes(deployment.web)
        if "gunicorn" in args and not _is_child(ppid, deployment.web)
    )
    workers = {pid for pid, ppid, _ in _processes(deployment.web) if ppid == master}
    job_id = deployment.trigger(deployment.token, queue="nobody-serves-this", task="jobs.noop")
    wait_for(  # an event stream keeps a live gauge: read some until every web worker has one
        lambda: (
            http(
                deployment.url(f"/api/v1/jobs/{job_id}/events?follow=false"),
                headers={"Authorization": f"Bearer {deployment.token}"},
            )
            and all(f"gauge_livesum_{pid}.db" in _metrics_files(deployment.web) for pid in workers)
        ),
        timeout=30,
        interval=0.05,
        what="no live gauge in every web worker",
    )
    victim = min(workers)
    deployment.web.exec("sh", "-c", f"kill -KILL {victim}")
    wait_for(
        lambda: (
            len({pid for pid, ppid, _ in _processes(deployment.web) if ppid == master} - {victim}) == len(workers)
            and http(deployment.url("/health"))[0] == 200
        ),
        timeout=30,
        what="gunicorn did not replace its worker",
    )
    assert f"gauge_livesum_{victim}.db" not in _metrics_files(deployment.web)
    assert f"histogram_{victim}.db" in _metrics_files(deployment.web)  # its counts stay in the sums


def _processes(container) -> list[tuple[str, str, str]]:
    lines = podman("top", container.name, "pid", "ppid", "args").stdout.splitlines()[1:]
    return [tuple(line.split(None, 2)) for line in lines]


def _is_child(ppid: str, container) -> bool:
    return any(pid == ppid and "gunicorn" in args for pid, _, args in _processes(container))


def _metrics_files(container) -> list[str]:
    return container.exec("ls", "/tmp/prometheus").stdout.split()


def test_an_arbitrary_uid_of_group_0_runs_a_worker_and_writes_documents(deployment):
    volume = f"pc-arbitrary-{uuid.uuid4().hex[:6]}"
    worker = deployment.start(
        ["worker", "--no-reaper"],
        env={"WORKERS_JSON": '[{"queue": "arbitrary", "concurrency": 1}]'},
        user="123456:0",
        volume=volume,
    )
    assert worker.exec("touch", "/app/var/ingestion/written-by-123456").returncode == 0
    job_id = deployment.trigger(deployment.token, queue="arbitrary", task="jobs.noop")
    wait_for(lambda: deployment.job_status(job_id) == "succeeded", timeout=30, what="the worker did not run")
    assert podman("top", worker.name, "huser").stdout.split()[1:] == ["123456", "123456"]


def test_the_image_holds_the_service_only_compiled(deployment):
    listing = run(["ls", "/app"], env=deployment.env)[1].split()  # no tests, bench, docs or Makefile
    assert set(listing) == {"docker-entrypoint.sh", "ingestion", "jobs", "manage.py", "pipeline_project"} | {
        "staticfiles",
        "templates",
        "tracking",
        "var",
        "__pycache__",
    }
    missing = run(
        [
            "python",
            "-c",
            "import importlib.util, pathlib, sys;"
            "paths = [p for root in ('/app', sys.prefix) for p in pathlib.Path(root).rglob('*.py')];"
            "print(sum(not pathlib.Path(importlib.util.cache_from_source(str(p))).exists() for p in paths), len(paths))",
        ],
        env=deployment.env,
    )[1].split()
    assert missing[-2] == "0" and int(missing[-1]) > 1000, missing
    size_mb = int(podman("image", "inspect", "--format", "{{.Size}}", IMAGE).stdout) / 1e6
    assert size_mb < SIZE_BUDGET_MB, f"{IMAGE} is {size_mb:.0f} MB"


def test_the_engine_image_adds_only_the_postgresql_server_and_serves_the_sqlrs_queue(deployment):
    service_layers = json.loads(podman("image", "inspect", "--format", "{{json .RootFS.Layers}}", IMAGE).stdout)
    engine_layers = json.loads(podman("image", "inspect", "--format", "{{json .RootFS.Layers}}", ENGINE_IMAGE).stdout)
    assert engine_layers[: len(service_layers)] == service_layers and len(engine_layers) == len(service_layers) + 1
    # A server to run states on (image postgres:17), and no cluster of its own.
    found = run(
        ["sh", "-c", "find /etc/postgresql /var/lib/postgresql -mindepth 1 | wc -l; ls /usr/lib/postgresql"],
        env=deployment.env,
        image=ENGINE_IMAGE,
    )
    assert found[1].split() == ["0", "17"], found

    engine = deployment.start(
        ["worker", "--no-reaper", "--queue", "sqlrs:1", "--metrics-port", str(free_port())],
        image=ENGINE_IMAGE,
        volume=f"pc-state-store-{uuid.uuid4().hex[:6]}",
    )
    wait_for(
        lambda: podman("healthcheck", "run", engine.name, check=False).returncode == 0,
        timeout=60,
        what="the engine worker to become healthy",
    )
    code, took = engine.stop(timeout=STOP_TIMEOUT_SEC)
    assert code == 0 and took < STOP_TIMEOUT_SEC, (code, took, engine.logs()[-2000:])


# Last in the module: these stop the deployment's containers.


def test_sigterm_lets_the_worker_finish_its_running_job_and_exit_0(deployment):
    job_id = deployment.trigger(deployment.token, queue="default", task="jobs.sleep", args={"seconds": 2})
    wait_for(lambda: deployment.job_status(job_id) == "running", timeout=20, what="the job never started")

    code, took = deployment.worker.stop(timeout=STOP_TIMEOUT_SEC)

    assert code == 0 and took < STOP_TIMEOUT_SEC, (code, took, deployment.worker.logs()[-2000:])
    assert deployment.job_status(job_id) == "succeeded"


def test_sigterm_ends_the_reaper_with_exit_0(deployment):
    code, took = deployment.reaper.stop(timeout=STOP_TIMEOUT_SEC)

    assert code == 0 and took < 5, (code, took, deployment.reaper.logs()[-2000:])


def test_sigterm_ends_web_with_an_open_event_stream_within_the_timeout_with_exit_0(deployment):
    token = deployment.token
    job_id = deployment.trigger(token, queue="nobody-serves-this", task="jobs.noop")  # its stream stays open
    stream = {}

    def follow():
        import urllib.request

        request = urllib.request.Request(
            deployment.url(f"/api/v1/jobs/{job_id}/events"), headers={"Authorization": f"Bearer {token}"}
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            stream["first"] = response.readline()
            stream["rest"] = response.read()  # raises if the stream is cut rather than ended
        stream["ended"] = True

    follower = threading.Thread(target=follow)
    follower.start()
    wait_for(lambda: "first" in stream, timeout=10, what="the stream did not start")

    code, took = deployment.web.stop(timeout=STOP_TIMEOUT_SEC)
    follower.join(10)

    assert code == 0 and took < 5, (code, took, deployment.web.logs()[-2000:])
    assert stream.get("ended"), stream  # ended cleanly: the client follows again elsewhere
