"""Liquibase prepares (``lb``; seed 7.2): Liquibase itself reads the changelog, the engine only
orchestrates it, one changeset per state.

- Arguments are filtered: the engine connects Liquibase (no ``--url``/``--username``/...),
  chooses the program (``SQLRS_LIQUIBASE_EXEC``) and the command (``update``, the only one a
  prepare takes); path arguments (``--changelog-file``, ``--defaults-file``,
  ``--search-path``) are made absolute against ``work_dir`` and must lie in the script roots.
- Planning runs ``update-sql`` against a throw-away copy of the image's base and splits its
  output at the ``-- Changeset <path>::<id>::<author>`` headers: each changeset is a step,
  its task hash the hash of its SQL (Liquibase's own bookkeeping lines left out, they carry
  run ids). Executing a step runs ``update-count --count=1``: the same changesets, in the
  same order, one at a time.
"""

import hashlib
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from jobs.dbstates.engine import prepare_args
from jobs.dbstates.engine.prepare_args import invalid

COMMAND = "update"
CONNECTION_FLAGS = {"--url", "--username", "--password", "--driver", "--driver-properties-file", "--classpath"}
CONNECTION_FLAGS |= {"--reference-url", "--reference-username", "--reference-password", "--default-schema-name"}
PATH_FLAGS = {"--changelog-file": "--changelog-file", "--changeLogFile": "--changelog-file"}
PATH_FLAGS |= {"--defaults-file": "--defaults-file", "--defaultsFile": "--defaults-file"}
LIST_PATH_FLAGS = {"--search-path": "--search-path", "--searchPath": "--search-path"}
ENV_NAME = re.compile(r"^LIQUIBASE_[A-Z0-9_]{1,100}$")
CONNECTION_ENV = {"LIQUIBASE_COMMAND_URL", "LIQUIBASE_COMMAND_USERNAME", "LIQUIBASE_COMMAND_PASSWORD"}
CONNECTION_ENV |= {"LIQUIBASE_CLASSPATH", "LIQUIBASE_COMMAND_DRIVER"}
CHANGESET_HEADER = re.compile(r"^-- Changeset (?P<path>.+)::(?P<id>[^:]+)::(?P<author>.+)$")
BOOKKEEPING = re.compile(r"databasechangelog", re.IGNORECASE)  # Liquibase's own tables: not the changeset's


@dataclass(frozen=True)
class LiquibaseRequest:
    options: list[str]  # the user's arguments without the command, paths made absolute
    env: dict[str, str]
    work_dir: str | None

    @property
    def normalized(self) -> str:
        return shlex.join([*self.options, COMMAND])


@dataclass(frozen=True)
class Changeset:
    path: str
    id: str
    author: str
    sql: str

    @property
    def content_hash(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def executable() -> str:
    if not settings.SQLRS_LIQUIBASE_EXEC:
        raise invalid(
            "Liquibase is not configured on this engine: set SQLRS_LIQUIBASE_EXEC to the liquibase executable"
        )
    return settings.SQLRS_LIQUIBASE_EXEC


def liquibase_request_normalize(
    *, liquibase_args, liquibase_exec=None, liquibase_exec_mode=None, liquibase_env=None, work_dir=None
) -> LiquibaseRequest:
    program = executable()
    if liquibase_exec not in (None, "", program):
        raise invalid("liquibase_exec cannot choose another program than the engine's SQLRS_LIQUIBASE_EXEC")
    if liquibase_exec_mode not in (None, "", "auto", "native"):
        raise invalid("liquibase_exec_mode must be auto or native on this engine")
    if work_dir is not None:
        if not isinstance(work_dir, str) or not work_dir.startswith("/"):
            raise invalid("work_dir must be an absolute path")
        work_dir = prepare_args.script_path(work_dir)
    env = _env(liquibase_env)
    prepare_args.string_args(liquibase_args, "liquibase_args")
    options, commands = [], []
    args = iter(liquibase_args)
    for arg in args:
        if not arg.startswith("--"):
            commands.append(arg)
            continue
        flag, has_value, value = arg.partition("=")
        if flag in CONNECTION_FLAGS:
            raise invalid(f"Liquibase flag {flag!r} is not allowed: the engine connects Liquibase itself", arg=arg)
        if flag in PATH_FLAGS or flag in LIST_PATH_FLAGS:
            if not has_value:
                value = next(args, None)
                if value is None:
                    raise invalid(f"{flag} needs a value")
            if flag in PATH_FLAGS:
                options.append(f"{PATH_FLAGS[flag]}={_path(value, work_dir)}")
            else:
                paths = ",".join(_path(part, work_dir) for part in value.split(",") if part)
                options.append(f"{LIST_PATH_FLAGS[flag]}={paths}")
            continue
        options.append(arg)
    if commands != [COMMAND]:
        raise invalid(f"liquibase_args must hold one command, {COMMAND!r} (the engine plans and applies it)")
    if not any(option.startswith("--changelog-file=") for option in options):
        raise invalid("liquibase_args need --changelog-file")
    return LiquibaseRequest(options=options, env=env, work_dir=work_dir)


def _env(liquibase_env) -> dict[str, str]:
    if liquibase_env is None:
        return {}
    if not isinstance(liquibase_env, dict) or len(liquibase_env) > 100:
        raise invalid("liquibase_env must be an object of at most 100 strings")
    for name, value in liquibase_env.items():
        if not isinstance(value, str) or "\x00" in value or len(value) > prepare_args.MAX_ARG_BYTES:
            raise invalid(f"liquibase_env.{name} must be a string")
        if not ENV_NAME.match(name) or name in CONNECTION_ENV:
            raise invalid(f"liquibase_env may only set LIQUIBASE_* settings other than the connection, not {name}")
    return dict(liquibase_env)


def _path(value: str, work_dir: str | None) -> str:
    path = Path(value)
    if not path.is_absolute():
        if work_dir is None:
            raise invalid(f"path {value!r} is relative: give it absolute, or give work_dir")
        path = Path(work_dir) / path
    return prepare_args.script_path(str(path))


def connection_args(port: int) -> list[str]:
    return [f"--url=jdbc:postgresql://127.0.0.1:{port}/postgres", "--username=sqlrs"]


def plan_argv(request: LiquibaseRequest, port: int) -> list[str]:
    return [executable(), *request.options, "update-sql", *connection_args(port)]


def step_argv(request: LiquibaseRequest, port: int) -> list[str]:
    return [executable(), *request.options, "update-count", "--count=1", *connection_args(port)]


def changesets_parse(output: str) -> list[Changeset]:
    """The changesets ``update-sql`` printed, in order, each with its own SQL."""
    changesets, current, lines = [], None, []
    for line in output.splitlines():
        header = CHANGESET_HEADER.match(line.strip())
        if header:
            if current:
                changesets.append(Changeset(**current, sql="\n".join(lines).strip()))
            current, lines = {"path": header["path"], "id": header["id"], "author": header["author"]}, []
        elif current is not None and not BOOKKEEPING.search(line):
            lines.append(line)
    if current:
        changesets.append(Changeset(**current, sql="\n".join(lines).strip()))
    return changesets


def task_hash(request: LiquibaseRequest, changeset: Changeset) -> str:
    filters = [option for option in request.options if not option.startswith(tuple(PATH_FLAGS.values()))]
    return prepare_args.digest(
        ("kind", "lb"),
        ("options", shlex.join(filters)),
        ("env", shlex.join(f"{k}={v}" for k, v in sorted(request.env.items()))),
        ("content", changeset.content_hash),
        ("engine", prepare_args.ENGINE_VERSION),
    )
