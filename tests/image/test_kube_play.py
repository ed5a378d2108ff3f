"""The Kubernetes manifests as podman plays them (deploy/kubernetes/overlays/ci): the migration
Job first, then web, worker, reaper and the engine, against the machine's PostgreSQL; a job
triggered through the API end to end."""

import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.helpers import wait_for
from tests.image.helpers import ENGINE_IMAGE, IMAGE, ROOT, Container, answers, fresh_databases, http, podman

pytestmark = [pytest.mark.image, pytest.mark.slow]

OVERLAY = ROOT / "deploy/kubernetes/overlays/ci"
SECRETS = Path("/tmp/pipeline-control-ci/secrets")  # the overlay's hostPath in place of the Secret
WEB_PORT, PROBE_PORT, ENGINE_WEB_PORT = 8000, 9000, 8001  # the overlay's, on the host's network


def rendered(path: Path) -> str:
    return subprocess.run(["kubectl", "kustomize", str(path)], capture_output=True, text=True, check=True).stdout


def play(manifests: str, *, down: bool = False) -> None:
    verb = ["kube", "down", "-"] if down else ["kube", "play", "-"]
    result = subprocess.run(
        ["podman", *verb], input=manifests, capture_output=True, text=True, timeout=300, check=False
    )
    if not down:
        assert result.returncode == 0, result.stdout + result.stderr


def container_named(suffix: str) -> Container:
    names = podman("ps", "--all", "--format", "{{.Names}}").stdout.split()
    return Container(next(name for name in names if name.endswith(suffix)))


@pytest.fixture(scope="module")
def played():
    busy = [port for port in (WEB_PORT, PROBE_PORT, ENGINE_WEB_PORT) if answers(port)]
    assert not busy, f"the ci overlay listens on the host's {busy}, which something else holds"
    podman("tag", IMAGE, "localhost/pipeline-control:ci")
    podman("tag", ENGINE_IMAGE, "localhost/pipeline-control-engine:ci")
    migrate, deployment = rendered(OVERLAY / "migrate"), rendered(OVERLAY)
    with fresh_databases() as databases:
        SECRETS.mkdir(parents=True, exist_ok=True)
        for name, value in {
            "database-url": databases.env["DATABASE_URL"],
            "pipeline-database-url": databases.env["PIPELINE_DATABASE_URL"],
            "secret-key": uuid.uuid4().hex,
        }.items():
            (SECRETS / name).write_text(value)
            (SECRETS / name).chmod(0o644)  # mounted as a Secret's files would be, for uid 10001
        try:
            play(migrate)
            migration = container_named("-migrate")
            code = podman("wait", migration.name, timeout=300).stdout.strip()
            assert code == "0", migration.logs()[-3000:]
            play(deployment)
            yield databases
        finally:
            play(deployment, down=True)
            play(migrate, down=True)
            podman("volume", "rm", "--force", "pipeline-control-ci-state-store", check=False)
            shutil.rmtree(SECRETS.parent, ignore_errors=True)


def test_the_migration_job_runs_before_the_rollout_and_every_role_comes_up_healthy(played):
    wait_for(lambda: http(f"http://127.0.0.1:{PROBE_PORT}/status")[0] == 200, timeout=90, what="web not ready")
    wait_for(lambda: http(f"http://127.0.0.1:{ENGINE_WEB_PORT}/health")[0] == 200, timeout=90, what="engine-web")
    for suffix in ("-web", "-worker", "-reaper", "-engine", "-engine-web"):
        container = container_named(suffix)
        wait_for(
            lambda container=container: podman("healthcheck", "run", container.name, check=False).returncode == 0,
            timeout=90,
            what=f"{container.name} to become healthy",
        )
        users = podman("top", container.name, "huser").stdout.split()[1:]
        assert users and "0" not in users and "root" not in users, (container.name, users)


def test_a_job_triggered_through_the_api_is_run_by_the_played_worker(played):
    web = container_named("-web")
    wait_for(lambda: http(f"http://127.0.0.1:{WEB_PORT}/health")[0] == 200, timeout=90, what="web not up")
    token = web.exec("python", "manage.py", "apitoken", "create", "kube-play").stdout.split()[-1]

    status, body = http(
        f"http://127.0.0.1:{WEB_PORT}/api/v1/jobs/trigger",
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Host": "localhost"},
        body={"queue": "default", "task": "jobs.noop", "lock_key": "kube-play"},
    )

    assert status == 201, body
    deadline = time.monotonic() + 60
    while played.query("SELECT status FROM dl_jobs WHERE job_id = %s", (body["job_id"],))[0][0] != "succeeded":
        assert time.monotonic() < deadline, container_named("-worker").logs()[-3000:]
        time.sleep(0.2)
