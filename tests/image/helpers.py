"""The shipped image under podman, as a deployment runs it: host networking against the
machine's PostgreSQL, a read-only root filesystem with a tmpfs /tmp and a volume at /app/var, no
capabilities, no new privileges. The images are built by deploy/image/build (`make image`)."""

import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parents[2]
VERSION = next(
    line.split('"')[1]
    for line in (ROOT / "pipeline_project/__init__.py").read_text().splitlines()
    if "__version__" in line
)
IMAGE = os.environ.get("PIPELINE_IMAGE", f"localhost/pipeline-control:{VERSION}")
ENGINE_IMAGE = os.environ.get("PIPELINE_ENGINE_IMAGE", f"localhost/pipeline-control-engine:{VERSION}")
SERVER = os.environ.get("IMAGE_TEST_DATABASE_SERVER", "postgres://postgres@127.0.0.1:5432")
SECURE = [
    "--read-only",
    "--tmpfs",
    "/tmp:rw,size=64m,mode=1777",
    "--cap-drop",
    "ALL",
    "--security-opt",
    "no-new-privileges",
]


def podman(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout, check=check)


@dataclass
class Databases:
    control: str
    pipeline: str

    @property
    def env(self) -> dict:
        return {"DATABASE_URL": f"{SERVER}/{self.control}", "PIPELINE_DATABASE_URL": f"{SERVER}/{self.pipeline}"}

    def query(self, statement: str, params=()) -> list[tuple]:
        with psycopg.connect(f"{SERVER}/{self.control}", autocommit=True) as conn:
            return conn.execute(statement, params).fetchall()


@contextmanager
def fresh_databases():
    """Two database names nobody has created: the image's migrate creates them."""
    name = f"image_{uuid.uuid4().hex[:10]}"
    databases = Databases(control=f"{name}_control", pipeline=f"{name}_pipeline")
    try:
        yield databases
    finally:
        with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as conn:
            for database in (databases.control, databases.pipeline):
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database)))


@dataclass
class Container:
    name: str
    volume: str | None = None  # the named volume at /app/var, removed with the container

    def logs(self) -> str:
        result = podman("logs", self.name, check=False)
        return result.stdout + result.stderr

    def inspect(self, template: str) -> str:
        return podman("inspect", "--format", template, self.name).stdout.strip()

    @property
    def running(self) -> bool:
        return self.inspect("{{.State.Running}}") == "true"

    def exec(self, *command: str, timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess:
        return podman("exec", self.name, *command, timeout=timeout, check=check)

    def stop(self, *, timeout: int) -> tuple[int, float]:
        """SIGTERM, SIGKILL after ``timeout`` s (as a runtime's stop): the exit code and seconds taken."""
        started = time.monotonic()
        podman("stop", "--time", str(timeout), self.name, timeout=timeout + 30)
        return int(self.inspect("{{.State.ExitCode}}")), time.monotonic() - started

    def wait_for_log(self, text: str, *, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.logs():
            assert self.running, f"{self.name} ended before logging {text!r}:\n{self.logs()[-3000:]}"
            assert time.monotonic() < deadline, f"{self.name} did not log {text!r}:\n{self.logs()[-3000:]}"
            time.sleep(0.2)

    def remove(self) -> None:
        podman("rm", "--force", "--time", "0", self.name, check=False)
        if self.volume:
            podman("volume", "rm", "--force", self.volume, check=False)


def run_args(role_args: list[str], *, env: dict, name: str, image: str, user: str | None, volume: str) -> list:
    args = ["--name", name, "--network", "host", *SECURE, "--volume", f"{volume}:/app/var"]
    if user:
        args += ["--user", user]
    for key, value in env.items():
        args += ["--env", f"{key}={value}"]
    return [*args, image, *role_args]


def start(role_args: list[str], *, env: dict, image: str = IMAGE, user: str | None = None, volume: str | None = None):
    """A detached container of the image running ``role_args``."""
    name = f"pc-{role_args[0]}-{uuid.uuid4().hex[:8]}"
    volume = volume or f"{name}-var"
    podman("run", "--detach", *run_args(role_args, env=env, name=name, image=image, user=user, volume=volume))
    return Container(name, volume)


def run(role_args: list[str], *, env: dict, image: str = IMAGE, timeout: float = 180, user: str | None = None):
    """Run ``role_args`` in a container to its end: (exit code, its output)."""
    name = f"pc-{role_args[0]}-{uuid.uuid4().hex[:8]}"
    args = run_args(role_args, env=env, name=name, image=image, user=user, volume=f"{name}-var")
    try:
        result = podman("run", "--attach", "stdout", "--attach", "stderr", *args, timeout=timeout, check=False)
        return result.returncode, result.stdout + "\n".join(
            line
            for line in result.stderr.splitlines()
            if "systemd" not in line  # podman's, not the container's
        )
    finally:
        podman("rm", "--force", name, check=False)
        podman("volume", "rm", "--force", f"{name}-var", check=False)


def http(url: str, *, method: str = "GET", headers: dict | None = None, body: dict | None = None, timeout: float = 10):
    """(status, parsed JSON or text) of one request; status 0 if nothing answered."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status, text = response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        status, text = exc.code, exc.read().decode()
    except (urllib.error.URLError, OSError) as exc:
        return 0, str(exc)
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


def answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False
