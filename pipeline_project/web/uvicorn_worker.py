"""The web server's gunicorn worker: uvicorn's, accepting on a listening socket of its own."""

import asyncio
import socket
import sys
from contextlib import suppress

from gunicorn.arbiter import Arbiter
from uvicorn import Server
from uvicorn_worker import UvicornWorker as BaseUvicornWorker

from pipeline_project.web.notifications import end_follows


class UvicornWorker(BaseUvicornWorker):
    """On the socket gunicorn's workers share, the first event loop to wake accepts every
    connection waiting: 16 clients connecting at once all landed on one of two workers, which
    then served them alone for as long as they kept their connections. Each worker here binds a
    socket of its own to the address (SO_REUSEPORT, which gunicorn_conf sets on the shared one
    too), so the kernel spreads new connections over the workers; the shared socket stops
    listening, so that no connection waits where no worker accepts. Unix sockets stay shared.
    The event loop is uvloop's, named rather than found (``auto``): the server measured is the
    one deployed, whatever else the environment holds."""

    CONFIG_KWARGS = {**BaseUvicornWorker.CONFIG_KWARGS, "loop": "uvloop"}

    def init_process(self):
        self.sockets = [own_listener(listener, backlog=self.cfg.backlog) for listener in self.sockets]
        super().init_process()

    async def _serve(self) -> None:  # the base's, with a server that ends open streams when stopping
        self.config.app = self.wsgi
        server = StreamEndingServer(config=self.config)
        self._install_sigquit_handler()
        await server.serve(sockets=self.sockets)
        if not server.started:
            sys.exit(Arbiter.WORKER_BOOT_ERROR)


class StreamEndingServer(Server):
    """On SIGTERM uvicorn stops accepting, then waits for open responses to end: an event stream
    follows for as long as its client likes, so a stop waited the whole graceful timeout and then
    cut it (a container runtime's default stop timeout, 10 s, is gunicorn's: exit 137). Once
    nothing new is accepted, every follow here ends after its current read, and its stream with
    it, cleanly: the client follows again from its last event id, on a server still serving."""

    async def shutdown(self, sockets=None) -> None:
        shutting_down = asyncio.ensure_future(super().shutdown(sockets))
        await asyncio.sleep(0)  # the listeners are closed in its first step
        end_follows()
        await shutting_down


def own_listener(shared, *, backlog: int):
    if shared.family not in (socket.AF_INET, socket.AF_INET6):
        return shared
    own = socket.socket(shared.family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    own.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    own.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    # As gunicorn's own listener: connections inherit it. Without it, a response written in two
    # sends (head, then body) waits for the client's delayed ACK: 40 ms each, under asyncio's loop.
    own.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    own.bind(shared.getsockname()[:2])
    own.listen(backlog)
    own.setblocking(False)
    with suppress(OSError):  # stops listening, for every worker (another did already, or will)
        shared.shutdown(socket.SHUT_RD)
    return own


def refuse_taken_addresses(addresses) -> None:
    """Fail if any TCP address is being listened on already (by another server, or another copy
    of this one), as a bind without SO_REUSEPORT would."""
    for address in addresses:
        if not isinstance(address, tuple):  # a unix socket: bound without SO_REUSEPORT
            continue
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a closed one's TIME_WAIT is no listener
            try:
                probe.bind(address[:2])
            except OSError as exc:
                raise SystemExit(f"Cannot listen on {address[0]}:{address[1]}: {exc.strerror}") from None
