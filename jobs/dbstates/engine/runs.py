"""Running psql or pgbench against an instance, streamed as sqlrs's RunEvents (seed 1.4, 2.3).

``run_prepare`` (blocking: the database and maybe a server start) checks the request,
resolves the instance by id or name and, if its server is gone, starts it again from its
runtime directory (recorded as a ``log`` event). ``run_events`` (async: a streamed response
waits on the event loop, not in a thread) runs the commands and yields ``start``,
``stdout``/``stderr`` lines and ``exit``. The client programs run as the servers' system
user, never as the service's, and their connection comes from the environment only.
"""

import asyncio
import os
import subprocess
from contextlib import aclosing
from dataclasses import dataclass, field

from django.utils import timezone

from jobs.dbstates import selectors, services
from jobs.dbstates.engine import images, postgres, prepare_args
from pipeline_project.api.errors import ConflictError

KINDS = ("psql", "pgbench")
# Flags that pick the server or the user: the engine connects the client itself.
CONNECTION_FLAGS = {
    "psql": {"-h", "--host", "-p", "--port", "-U", "--username", "-d", "--dbname"},
    "pgbench": {"-h", "--host", "-p", "--port", "-U", "--username"},
}
MAX_STEPS = 100
MAX_LINE = 64 * 1024  # a longer line is streamed in pieces of this size
EVENTS_BUFFERED = 64  # output events read ahead of the client (at most 64 * MAX_LINE bytes)


@dataclass
class RunCommand:
    args: list[str]
    stdin: str | None


@dataclass
class RunPlan:
    instance_id: str
    env: dict[str, str]
    commands: list[RunCommand]
    recovery: list[str] = field(default_factory=list)


def _refuse_connection_flags(kind: str, args: list[str]) -> None:
    """sqlrs answers a conflicting connection flag with 409: the instance decides the connection."""
    for arg in args:
        flag = arg.partition("=")[0] if arg.startswith("--") else arg[:2]
        if flag in CONNECTION_FLAGS[kind] or arg.startswith(("postgres://", "postgresql://")) or "host=" in arg:
            raise ConflictError(
                f"{kind} argument {arg!r} conflicts with the instance's connection (the engine connects)",
                code="conflict",
            )


def _commands(*, kind: str, args, stdin, steps: list[RunCommand] | None) -> list[RunCommand]:
    """The commands a run request asks for: its args and stdin, or (psql) its steps."""
    if steps is None:
        return [RunCommand(prepare_args.string_args(args, "args"), prepare_args.stdin_text(stdin, "stdin"))]
    if kind != "psql":
        raise prepare_args.invalid("steps are for psql runs only")
    if not 1 <= len(steps) <= MAX_STEPS:
        raise prepare_args.invalid(f"steps must be an array of 1 to {MAX_STEPS} steps")
    if stdin is not None:
        raise prepare_args.invalid("steps and stdin are mutually exclusive (give each step its stdin)")
    return [
        RunCommand(
            prepare_args.string_args(step.args, f"steps[{n}].args"), prepare_args.stdin_text(step.stdin, "stdin")
        )
        for n, step in enumerate(steps)
    ]


def run_prepare(
    *, instance_ref, kind, args=None, command=None, stdin=None, steps: list[RunCommand] | None = None
) -> RunPlan:
    """Check a run request and make its instance's server ready (started again if it is gone);
    ``steps``: each step's args and stdin."""
    if kind not in KINDS:
        raise prepare_args.invalid(f"kind must be one of {', '.join(KINDS)}")
    if command not in (None, kind):
        raise prepare_args.invalid(f"command may only be {kind!r} for a {kind} run (or omitted)")
    if not isinstance(instance_ref, str) or not instance_ref:
        raise prepare_args.invalid("instance_ref is required (an instance id or name)")
    commands = _commands(kind=kind, args=args, stdin=stdin, steps=steps)
    for run in commands:
        _refuse_connection_flags(kind, run.args)
    instance, _by_name = selectors.instance_resolve(ref=instance_ref)
    server, recovery = services.instance_server_ensure(instance_id=instance.instance_id)
    program = images.image_resolve(instance.image_id).program(kind)
    return RunPlan(
        instance_id=instance.instance_id,
        env=postgres.client_env(server),
        commands=[RunCommand([program, *run.args], run.stdin) for run in commands],
        recovery=recovery,
    )


def _event(kind: str, **fields) -> dict:
    return {"type": kind, "ts": selectors.rfc3339(timezone.now()), **fields}


def error_event(error: dict) -> dict:
    """The event that ends a run that failed in the engine: ``error`` is an ErrorResponse."""
    return _event("error", error=error)


async def run_events(plan: RunPlan):
    """Yield the run's events; the commands run one after the other until one fails."""
    for message in plan.recovery:
        yield _event("log", data=message)
    yield _event("start", instance_id=plan.instance_id)
    exit_code = 0
    for command in plan.commands:
        async with aclosing(_command_events(command, plan.env)) as events:  # closed with this one
            async for event in events:
                if event["type"] == "exit":
                    exit_code = event["exit_code"]
                else:
                    yield event
        if exit_code != 0:
            break
    yield _event("exit", exit_code=exit_code)


async def _command_events(command: RunCommand, env: dict[str, str]):
    process = await _Child.start(command.args, env=env, with_stdin=command.stdin is not None)
    # Bounded: a client that reads slowly stops the pipes' reading, and the program waits on its
    # writes, instead of its whole output piling up here.
    events: asyncio.Queue = asyncio.Queue(maxsize=EVENTS_BUFFERED)

    async def pump(stream, kind: str) -> None:
        pending = b""
        while chunk := await stream.read(MAX_LINE):
            pending += chunk
            while (end := pending.find(b"\n")) >= 0 or len(pending) >= MAX_LINE:
                cut = end + 1 if end >= 0 else MAX_LINE
                await events.put(_event(kind, data=pending[:cut].decode("utf-8", errors="replace")))
                pending = pending[cut:]
        if pending:
            await events.put(_event(kind, data=pending.decode("utf-8", errors="replace")))

    async def feed() -> None:
        try:
            process.stdin.write(command.stdin.encode())
            await process.stdin.drain()
            process.stdin.close()
        except (BrokenPipeError, ConnectionResetError):
            pass

    tasks = [asyncio.create_task(pump(process.stdout, "stdout")), asyncio.create_task(pump(process.stderr, "stderr"))]
    if command.stdin is not None:
        tasks.append(asyncio.create_task(feed()))
    readers = asyncio.gather(*tasks)
    getter = None
    try:
        while not (readers.done() and events.empty()):
            getter = asyncio.ensure_future(events.get())
            await asyncio.wait({getter, readers}, return_when=asyncio.FIRST_COMPLETED)
            if getter.done():
                yield getter.result()
            else:
                getter.cancel()
        readers.result()  # a reader's failure is the run's
        yield _event("exit", exit_code=await process.wait())
    finally:  # the client went away (or the stream failed): the command does not outlive it
        if getter is not None:
            getter.cancel()
        readers.cancel()
        await asyncio.wait(tasks)
        await process.close()


@dataclass
class _Child:
    """A client program and its pipes on the running event loop, whichever loop that is.

    The program is started by ``subprocess.Popen`` (which can run it as the servers' user:
    uvloop's ``subprocess_exec``, the deployed server's, refuses ``user=`` and ``group=``), its
    pipes are the loop's streams, and its exit is awaited on a pidfd: no thread waits for it.
    """

    process: subprocess.Popen
    stdout: asyncio.StreamReader
    stderr: asyncio.StreamReader
    stdin: asyncio.StreamWriter | None
    _transports: list[asyncio.BaseTransport]
    _exited: asyncio.Future

    @classmethod
    async def start(cls, args: list[str], *, env: dict[str, str], with_stdin: bool) -> "_Child":
        loop = asyncio.get_running_loop()
        # As asyncio's own subprocess_exec does, on the loop: a fork and exec, nothing waited for.
        process = subprocess.Popen(  # noqa: ASYNC220
            args,
            stdin=subprocess.PIPE if with_stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd="/",
            **postgres.as_server_user(),
        )
        exited = loop.create_future()
        pidfd = os.pidfd_open(process.pid)  # readable once the process has exited

        def on_exit() -> None:
            loop.remove_reader(pidfd)
            os.close(pidfd)
            exited.set_result(None)

        loop.add_reader(pidfd, on_exit)
        child = cls(process, asyncio.StreamReader(), asyncio.StreamReader(), None, [], exited)
        try:
            for reader, pipe in ((child.stdout, process.stdout), (child.stderr, process.stderr)):
                transport, _ = await loop.connect_read_pipe(lambda r=reader: asyncio.StreamReaderProtocol(r), pipe)
                child._transports.append(transport)
            if with_stdin:
                transport, protocol = await loop.connect_write_pipe(
                    lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader()), process.stdin
                )
                child._transports.append(transport)
                child.stdin = asyncio.StreamWriter(transport, protocol, None, loop)
        except BaseException:
            await child.close()
            raise
        return child

    async def wait(self) -> int:
        await asyncio.shield(self._exited)
        return self.process.wait()

    async def close(self) -> None:
        """Kill the program if it still runs, reap it, and close its pipes."""
        if self.process.poll() is None:
            self.process.kill()
        await self.wait()
        for transport in self._transports:
            transport.close()
