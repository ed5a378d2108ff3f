"""What production runs: the container image, the compose file, and the production settings."""

import json
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
HADOLINT = str(Path(sys.executable).parent / "hadolint")


def test_the_dockerfile_passes_hadolint_with_no_finding():
    result = subprocess.run(
        [HADOLINT, "--no-color", "Dockerfile"], cwd=ROOT, capture_output=True, text=True, check=False
    )

    assert result.returncode == 0 and result.stdout == "", result.stdout


def instructions() -> list[str]:
    lines = (ROOT / "Dockerfile").read_text().replace("\\\n", " ").splitlines()
    return [" ".join(line.split()) for line in lines if line.strip() and not line.lstrip().startswith("#")]


def test_the_image_is_built_from_a_pinned_base_pinned_packages_and_a_hashed_lock():
    steps = instructions()

    assert steps[0] == "ARG BASE_IMAGE" and "FROM ${BASE_IMAGE} AS system" in steps  # the build names a digest
    installs = [match for step in steps for match in re.findall(r"apt-get install ([^&]*)", step)]
    packages = [word for words in installs for word in words.split() if not word.startswith("-")]
    assert packages and all("=" in package for package in packages), packages  # every Debian package at a version
    pip = next(step for step in steps if "pip install" in step)
    assert "--require-hashes" in pip and "--no-deps" in pip and "-r /tmp/service.lock" in pip


def test_the_lock_pins_every_package_of_the_service_requirements_with_hashes():
    lock = (ROOT / "requirements/service.lock").read_text()
    locked = dict(re.findall(r"^([a-z0-9._-]+)==(\S+) \\$", lock, flags=re.MULTILINE | re.IGNORECASE))
    pins = re.findall(r"^([A-Za-z0-9._-]+)(?:\[[^]]*\])?==(\S+)", (ROOT / "requirements/service.txt").read_text(), re.M)

    normalized = {name.lower().replace("_", "-"): version for name, version in locked.items()}
    assert {name.lower().replace("_", "-"): version for name, version in pins}.items() <= normalized.items()
    assert lock.count("==") == len(locked) and all(f"{name}==" in lock for name in locked)
    body = "\n".join(line for line in lock.splitlines() if not line.startswith("#"))
    entries = re.split(r"\n(?=[a-z0-9])", body.strip(), flags=re.IGNORECASE)
    assert len(entries) == len(locked)
    for entry in entries:
        assert "--hash=sha256:" in entry, entry.splitlines()[0]


def test_the_image_holds_the_service_only_and_runs_it_unprivileged_under_tini():
    steps = instructions()
    copies = [step for step in steps if step.startswith("COPY") and "--from" not in step]

    assert "COPY . ." not in steps  # tests, bench, docs, the Makefile stay out
    sources = {step.split()[1] for step in copies}
    assert sources == {
        "requirements/service.lock",
        "manage.py",
        "pipeline_project",
        "tracking",
        "jobs",
        "ingestion",
        "templates",
    }
    assert any("compileall" in step for step in steps) and any("collectstatic" in step for step in steps)
    users = [step for step in steps if step.startswith("USER")]
    assert users == ["USER 10001:0", "USER 0", "USER 10001:0"]  # root only to add the engine's packages
    assert 'ENTRYPOINT ["/usr/bin/tini", "-s", "--", "/app/docker-entrypoint.sh"]' in steps
    assert any(step.startswith("HEALTHCHECK") and "docker-entrypoint.sh" in step for step in steps)
    assert "PROMETHEUS_MULTIPROC_DIR" not in " ".join(steps)  # the web role's alone (docker-entrypoint.sh)
    assert steps[-1] == "FROM runtime"  # a build without --target is the service's image, not the engine's


def test_compose_has_postgres_a_single_migration_web_and_worker_with_health_checks():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]

    assert set(services) == {"postgres", "migrate", "web", "worker"}
    for name in ("postgres", "web", "worker"):
        assert services[name]["healthcheck"]["test"], name
    for name in ("web", "worker"):
        depends = services[name]["depends_on"]
        assert depends["postgres"]["condition"] == "service_healthy"
        assert depends["migrate"]["condition"] == "service_completed_successfully"
        assert services[name]["environment"]["DATABASE_URL"].startswith("postgres://")
        assert services[name]["read_only"] is True and services[name]["cap_drop"] == ["ALL"]
    assert services["migrate"]["command"] == "migrate" and services["migrate"]["restart"] == "no"
    # Stopped before the runtime's SIGKILL: gunicorn's graceful timeout (10 s) and the worker's (30 s).
    assert int(services["web"]["stop_grace_period"].rstrip("s")) > 10
    assert int(services["worker"]["stop_grace_period"].rstrip("s")) > 30
    assert all(":8000-" in port for port in services["web"]["ports"])  # --scale web=N gets a port each


def test_compose_writes_no_secret_and_reads_them_from_files():
    for path in ("docker-compose.yml", "docker-compose.scale.yml"):
        text = (ROOT / path).read_text()
        assert not re.search(r"postgres://[^@/\s]+:[^@/\s]+@", text), path  # no password in a URL
        assert "POSTGRES_PASSWORD:" not in text and "SECRET_KEY:" not in text, path
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    assert services["postgres"]["environment"]["POSTGRES_PASSWORD_FILE"] == "/run/secrets/db_password"
    for name in ("migrate", "web", "worker"):
        environment = services[name]["environment"]
        assert environment["DATABASE_PASSWORD_FILE"] == "/run/secrets/db_password"
        assert environment["SECRET_KEY_FILE"] == "/run/secrets/secret_key"


def test_the_scale_topology_runs_workers_without_housekeeping_one_reaper_and_the_engine_on_its_own_host():
    services = yaml.safe_load((ROOT / "docker-compose.scale.yml").read_text())["services"]
    base = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]

    assert "--no-reaper" in services["worker"]["command"]
    assert services["reaper"]["command"] == "reaper" and "deploy" not in services["reaper"]  # one
    for name in ("reaper", "engine", "engine-web"):  # one environment, the first file's, extended
        assert services[name]["extends"] == {"file": "docker-compose.yml", "service": "worker"}, name
        assert "DATABASE_URL" not in services[name].get("environment", {}), name
    engine = services["engine"]
    command = engine["command"]
    assert command[0] == "worker" and "--no-reaper" in command and command[command.index("--queue") + 1] == "sqlrs:2"
    assert engine["hostname"] == "engine"  # the engine's host, as recorded, across re-creations
    assert engine["build"]["target"] == "engine"  # the service's layers and the PostgreSQL server
    web = services["engine-web"]
    assert web["command"] == "web" and web["network_mode"] == "service:engine"  # its loopback servers
    assert engine["volumes"] == web["volumes"] == ["state-store:/app/var/state-store"]
    assert all("sqlrs" not in json.dumps(service.get("environment", {})) for service in base.values())


@pytest.mark.parametrize(
    ("missing", "message"),
    [
        ("DATABASE_URL", "DATABASE_URL (or DATABASE_URL_FILE, a file holding it) is required"),
        ("SECRET_KEY", "SECRET_KEY (or"),
    ],
)
def test_the_entrypoint_refuses_to_start_without_its_settings(missing, message):
    env = {"PATH": os.environ["PATH"], "DATABASE_URL": "postgres://x@db/control", "SECRET_KEY": "k"}
    del env[missing]

    result = subprocess.run(
        ["sh", "docker-entrypoint.sh", "web"], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )

    assert result.returncode == 64 and message in result.stderr


def test_the_entrypoint_takes_secrets_as_files(tmp_path):
    (tmp_path / "url").write_text("postgres://x@db/control\n")
    (tmp_path / "key").write_text("k")
    env = {
        "PATH": os.environ["PATH"],
        "DATABASE_URL_FILE": str(tmp_path / "url"),
        "SECRET_KEY_FILE": str(tmp_path / "key"),
    }

    result = subprocess.run(
        ["sh", "docker-entrypoint.sh", "true"], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )

    assert result.returncode == 0, result.stderr


def test_check_deploy_has_nothing_to_say_about_the_production_settings():
    env = {
        **{key: value for key, value in os.environ.items() if key != "DEBUG"},
        "HTTPS": "1",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "pipeline.example.com",
        "DATABASE_URL": "postgres://app:secret@db.internal:5432/control",  # settings only: nothing connects
    }

    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout
