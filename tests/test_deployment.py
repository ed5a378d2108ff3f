"""What production runs: the container image, the compose file, and the production settings."""

import json
import os
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


def test_the_image_runs_as_a_non_root_user_with_dependencies_in_their_own_layer():
    lines = [line.strip() for line in (ROOT / "Dockerfile").read_text().splitlines()]
    instructions = [line for line in lines if line and not line.startswith("#")]

    assert instructions[0].startswith("FROM python:3.13") and "slim" in instructions[0]
    copy_requirements = instructions.index("COPY requirements/service.txt requirements/service.txt")
    assert instructions[copy_requirements + 1].startswith("RUN pip install")
    assert copy_requirements < instructions.index("COPY . .")  # a source change keeps the dependency layer
    assert any("collectstatic" in line for line in instructions)
    assert [line for line in instructions if line.startswith("USER")] == ["USER 10001:10001"]


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
    assert services["migrate"]["command"] == "migrate" and services["migrate"]["restart"] == "no"


def test_the_scale_topology_runs_workers_without_housekeeping_one_reaper_and_the_engine_on_its_own_host():
    base = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    services = yaml.safe_load((ROOT / "docker-compose.scale.yml").read_text())["services"]

    assert "--no-reaper" in services["worker"]["command"]
    assert services["reaper"]["command"] == "reaper" and "deploy" not in services["reaper"]  # one
    engine = services["engine"]
    command = engine["command"]
    assert command[0] == "worker" and "--no-reaper" in command and command[command.index("--queue") + 1] == "sqlrs:2"
    assert engine["hostname"] == "engine"  # the engine's host, as recorded, across re-creations
    assert engine["build"]["args"]["ENGINE_PACKAGES"].startswith("postgresql-")  # servers for its images
    web = services["engine-web"]
    assert web["command"] == "web" and web["network_mode"] == "service:engine"  # its loopback servers
    assert engine["volumes"] == web["volumes"] == ["state-store:/app/var/state-store"]
    assert all("sqlrs" not in json.dumps(service.get("environment", {})) for service in base.values())
    for name in ("reaper", "engine"):
        depends = services[name]["depends_on"]
        assert depends["migrate"]["condition"] == "service_completed_successfully", name


@pytest.mark.parametrize(
    ("missing", "message"), [("DATABASE_URL", "DATABASE_URL is required"), ("SECRET_KEY", "SECRET_KEY is required")]
)
def test_the_entrypoint_refuses_to_start_without_its_settings(missing, message):
    env = {"PATH": os.environ["PATH"], "DATABASE_URL": "postgres://x@db/control", "SECRET_KEY": "k"}
    del env[missing]

    result = subprocess.run(
        ["sh", "docker-entrypoint.sh", "web"], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )

    assert result.returncode == 64 and message in result.stderr


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
