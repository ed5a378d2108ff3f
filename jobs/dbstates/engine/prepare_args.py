"""psql prepare arguments and the plan's ids (seed 2.1; sqlrs's normalization and hashing).

Arguments are checked and normalized as sqlrs does: no connection flags (the engine connects),
no positional arguments, absolute script paths, stdin if and only if ``-f -``, and the
engine's deterministic defaults ``-X`` and ``-v ON_ERROR_STOP=1``. Each ``-f``/``-c`` is one
step, and each step makes one state; the other options apply to every step.

Every id is a sha256 over ``key=<len>:<value>`` lines:
- a step's ``task_hash`` from the kind, the content hash of its input and its options, and
  the engine version;
- a state's id from its input (the resolved image, or the parent state) and the task_hash;
- a job's ``signature`` from its task hashes, the resolved image and ``plan_only``.
So the same script on the same image is the same state, whatever the file's path.
"""

import hashlib
import shlex
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from pipeline_project.api.errors import InvalidInputError

ENGINE_VERSION = "pipeline-sqlrs/1"
DEFAULTS = ["-X", "-v", "ON_ERROR_STOP=1"]
CONNECTION_FLAGS = {"-h", "--host", "-p", "--port", "-U", "--username", "-d", "--dbname", "-w", "--no-password"}
CONNECTION_FLAGS |= {"-W", "--password"}
# Flags that take a value, by every spelling, and their canonical short form.
VALUE_FLAGS = {"-f": "-f", "--file": "-f", "-c": "-c", "--command": "-c"}
VALUE_FLAGS |= {"-v": "-v", "--set": "-v", "--variable": "-v"}
SWITCHES = {"-X": "-X", "--no-psqlrc": "-X", "-1": "-1", "--single-transaction": "-1", "-q": "-q", "--quiet": "-q"}
SWITCHES |= {"-e": "-e", "--echo-queries": "-e", "-a": "-a", "--echo-all": "-a", "-b": "-b", "--echo-errors": "-b"}
MAX_ARGS = 1000
MAX_ARG_BYTES = 64 * 1024


def invalid(message: str, **details) -> InvalidInputError:
    return InvalidInputError(message, code="invalid_argument", details=details)


def digest(*parts: tuple[str, str]) -> str:
    """sha256 hex over ``key=<len>:<value>`` lines (lengths keep any two part lists apart)."""
    hasher = hashlib.sha256()
    for key, value in parts:
        hasher.update(f"{key}={len(value)}:{value}\n".encode())
    return hasher.hexdigest()


@dataclass(frozen=True)
class PsqlStep:
    kind: str  # "file", "stdin" or "command"
    value: str  # the path, "-" or the SQL text

    @property
    def args(self) -> list[str]:
        return ["-c", self.value] if self.kind == "command" else ["-f", self.value]


@dataclass(frozen=True)
class PsqlRequest:
    options: list[str]  # normalized, the engine's defaults first
    steps: list[PsqlStep]
    stdin: str | None

    @property
    def normalized(self) -> str:
        return shlex.join([*self.options, *(arg for step in self.steps for arg in step.args)])

    def step_args(self, step: PsqlStep) -> list[str]:
        return [*self.options, *step.args]


def string_args(value, what: str) -> list[str]:
    """A client program's arguments as a request gives them: bounded strings without NUL."""
    if not isinstance(value, list) or not all(isinstance(arg, str) for arg in value):
        raise invalid(f"{what} must be an array of strings")
    if len(value) > MAX_ARGS or any(len(arg.encode()) > MAX_ARG_BYTES or "\x00" in arg for arg in value):
        raise invalid(f"{what}: at most {MAX_ARGS} arguments of {MAX_ARG_BYTES} bytes, without NUL")
    return value


def stdin_text(value, what: str) -> str | None:
    """A client program's stdin as a request gives it: None, or text without NUL within SQLRS_MAX_STDIN_BYTES."""
    if value is not None and (not isinstance(value, str) or "\x00" in value):
        raise invalid(f"{what} must be a string without NUL")
    if value is not None and len(value.encode()) > settings.SQLRS_MAX_STDIN_BYTES:
        raise invalid(f"{what} is larger than {settings.SQLRS_MAX_STDIN_BYTES} bytes")
    return value


def psql_request_normalize(*, psql_args, stdin) -> PsqlRequest:
    """Check and normalize a psql prepare's arguments; a 400 (``invalid_argument``) says what is wrong."""
    string_args(psql_args, "psql_args")
    stdin_text(stdin, "stdin")
    options, steps = list(DEFAULTS), []
    args = iter(psql_args)
    for arg in args:
        if arg.startswith("--"):
            flag, _, inline = arg.partition("=")
            inline = inline if "=" in arg else None
        else:
            flag, inline = arg[:2], (arg[2:] or None)
        if flag in CONNECTION_FLAGS:
            raise invalid(f"connection flag {arg!r} is not allowed: the engine connects psql itself", arg=arg)
        if flag in SWITCHES and inline is None:
            if SWITCHES[flag] != "-X" and SWITCHES[flag] not in options:
                options.append(SWITCHES[flag])
            continue
        if flag not in VALUE_FLAGS:
            if not arg.startswith("-") or arg == "-":
                raise invalid(f"positional argument {arg!r} is not allowed (scripts are given with -f)", arg=arg)
            raise invalid(f"psql flag {arg!r} is not supported in a prepare", arg=arg)
        value = inline if inline is not None else next(args, None)
        if value is None:
            raise invalid(f"{arg} needs a value", arg=arg)
        canonical = VALUE_FLAGS[flag]
        if canonical == "-v":
            options += ["-v", _variable(value)]
        elif canonical == "-c":
            steps.append(PsqlStep("command", value))
        elif value == "-":
            steps.append(PsqlStep("stdin", "-"))
        else:
            steps.append(PsqlStep("file", script_path(value)))
    _dedupe_on_error_stop(options)
    if not steps:
        raise invalid("psql_args have no script: give -f <absolute path>, -f - with stdin, or -c <sql>")
    stdin_steps = sum(step.kind == "stdin" for step in steps)
    if stdin_steps > 1:
        raise invalid("-f - may appear once")
    if (stdin_steps == 1) != (stdin is not None):
        raise invalid("stdin is required with -f -, and only with it")
    return PsqlRequest(options=options, steps=steps, stdin=stdin)


def _variable(value: str) -> str:
    name, sep, setting = value.partition("=")
    if not name or not sep:
        raise invalid(f"-v takes NAME=VALUE, not {value!r}")
    if name.upper() == "ON_ERROR_STOP":
        if setting.lower() not in ("1", "on", "true"):
            raise invalid("ON_ERROR_STOP is always 1 in a prepare (a failed statement fails the step)")
        return "ON_ERROR_STOP=1"
    return value


def _dedupe_on_error_stop(options: list[str]) -> None:
    seen = False
    i = 0
    while i < len(options):
        if options[i] == "-v" and options[i + 1] == "ON_ERROR_STOP=1":
            if seen:
                del options[i : i + 2]
                continue
            seen = True
        i += 1


def script_path(value: str) -> str:
    """An absolute path inside one of ``SQLRS_SCRIPT_ROOTS`` (symlinks resolved: no way out)."""
    path = Path(value)
    if not path.is_absolute():
        raise invalid(f"script path {value!r} must be absolute", path=value)
    resolved = path.resolve()
    roots = [Path(root).resolve() for root in settings.SQLRS_SCRIPT_ROOTS]
    if not any(resolved.is_relative_to(root) for root in roots):
        raise invalid(
            f"script path {value!r} is outside the directories scripts may be read from",
            path=value,
            allowed=[str(root) for root in roots],
        )
    return str(path)


def step_content_hash(step: PsqlStep, *, stdin: str | None) -> str:
    """sha256 of what the step runs: the file's bytes, stdin, or the command's text."""
    if step.kind == "stdin":
        return hashlib.sha256(stdin.encode()).hexdigest()
    if step.kind == "command":
        return hashlib.sha256(step.value.encode()).hexdigest()
    path = Path(step.value)
    try:
        if not path.is_file():
            raise invalid(f"script {step.value!r} is not a readable file", path=step.value)
        if path.stat().st_size > settings.SQLRS_MAX_SCRIPT_BYTES:
            raise invalid(f"script {step.value!r} is larger than {settings.SQLRS_MAX_SCRIPT_BYTES} bytes")
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        raise invalid(f"script {step.value!r} cannot be read: {exc.strerror}", path=step.value) from None


def task_hash(request: PsqlRequest, step: PsqlStep) -> str:
    return digest(
        ("kind", "psql"),
        ("options", shlex.join(request.options)),
        ("input", step.kind),
        ("content", step_content_hash(step, stdin=request.stdin)),
        ("engine", ENGINE_VERSION),
    )


def state_id(*, input_kind: str, input_id: str, task_hash: str) -> str:
    return digest(("input_kind", input_kind), ("input_id", input_id), ("task_hash", task_hash))


def signature(*, task_hashes: list[str], resolved_image_id: str, plan_only: bool) -> str:
    return digest(
        ("task_hash", ",".join(task_hashes)),
        ("image", resolved_image_id),
        ("plan_only", "true" if plan_only else "false"),
    )


@dataclass(frozen=True)
class ChainLink:
    """One step of a plan's chain: its input, its task hash and the state it makes."""

    step: object  # a PsqlStep or a Liquibase Changeset
    input_kind: str
    input_id: str
    task_hash: str
    output_state_id: str


def chain(steps: list, task_hashes: list[str], *, resolved_image_id: str) -> list[ChainLink]:
    """Each step's input and output state: the image for the first, the previous state after."""
    links, input_kind, input_id = [], "image", resolved_image_id
    for step, hashed in zip(steps, task_hashes, strict=True):
        output = state_id(input_kind=input_kind, input_id=input_id, task_hash=hashed)
        links.append(ChainLink(step, input_kind, input_id, hashed, output))
        input_kind, input_id = "state", output
    return links
