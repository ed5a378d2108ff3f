"""The web server's gunicorn worker: uvicorn's, accepting on a listening socket of its own, and
closing connections whose requests stall."""

import asyncio
import socket
import sys
from contextlib import suppress

from gunicorn.arbiter import Arbiter
from uvicorn import Server
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol
from uvicorn_worker import UvicornWorker as BaseUvicornWorker

from pipeline_project.environment import env_number
from pipeline_project.web.waiting import end_follows


class UvicornWorker(BaseUvicornWorker):
    """On the socket gunicorn's workers share, the first event loop to wake accepts every
    connection waiting: 16 clients connecting at once all landed on one of two workers, which
    then served them alone for as long as they kept their connections. Each worker here binds a
    socket of its own to the address (SO_REUSEPORT, which gunicorn_conf sets on the shared one
    too), so the kernel spreads new connections over the workers; the shared socket stops
    listening, so that no connection waits where no worker accepts. Unix sockets stay shared.
    The event loop is uvloop's, named rather than found (``auto``): the server measured is the
    one deployed, whatever else the environment holds; so is the HTTP protocol, httptools'
    with a read timeout (RequestReadTimeoutProtocol)."""

    CONFIG_KWARGS = {
        **BaseUvicornWorker.CONFIG_KWARGS,
        "loop": "uvloop",
        "http": f"{__name__}:RequestReadTimeoutProtocol",
    }

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


class RequestReadTimeoutProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, waiting a bounded time for each byte of a request.

    uvicorn waits for a request for as long as its client likes: half a request's headers, or 12
    bytes of a body declared 100 long, held the connection (and the request's task) for as long as
    the client kept it, over 80 s measured. Here a timer runs while the server waits on the client
    for a request: from the connection's start, or the first byte after a complete request, until
    the request's last byte; every read restarts it. When ``read_timeout`` passes without one, the
    connection is closed, as nginx's client_header_timeout and client_body_timeout do: after a 408
    in its path's error shape if the headers were read and nothing has been answered yet.

    No timer runs once a request is complete: an answer in progress (an event stream, whose client
    sends nothing more) waits on the server, and the keep-alive timeout rules between requests.
    While reading is paused (a body the application has not asked for yet, a pipelined request
    behind an answer) the server, not the client, is the one waiting: the timer only starts again.
    """

    read_timeout = env_number("WEB_REQUEST_READ_TIMEOUT", 30)

    def connection_made(self, transport) -> None:
        self.read_timer = None
        self.reading = "headers"  # the first request's, awaited from the start
        super().connection_made(transport)
        self.restart_read_timer()

    def connection_lost(self, exc) -> None:
        self.reading = None
        self.restart_read_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        # Bytes after a complete request begin the next one; the parser starts no request for the
        # empty lines it skips before one, which still cancel uvicorn's keep-alive timer.
        self.reading = self.reading or "headers"
        super().data_received(data)
        self.restart_read_timer()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.reading = "headers"

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self.reading = "body"

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self.reading = None

    def restart_read_timer(self) -> None:
        if self.read_timer is not None:
            self.read_timer.cancel()
        waiting = self.reading is not None and not self.transport.is_closing()
        self.read_timer = self.loop.call_later(self.read_timeout, self.read_timed_out) if waiting else None

    def read_timed_out(self) -> None:
        if self.flow.read_paused:
            self.restart_read_timer()
        elif not self.transport.is_closing():
            # Unless an answer before it (pipelined) is still being sent, the client reads this one next.
            if self.reading == "body" and not self.cycle.response_started and not self.pipeline:
                self.transport.write(request_timeout(self.scope["path"], self.server_state.default_headers))
            self.transport.close()  # the request's task reads a disconnect, and ends


def request_timeout(path: str, default_headers: list[tuple[bytes, bytes]]) -> bytes:
    """A 408 answer in ``path``'s error shape, closing the connection: written by the protocol,
    as no application has the request to answer it."""
    # Here, not at the top: gunicorn's master imports this module (gunicorn_conf), without Django.
    from pipeline_project.api.errors import status_error

    response = status_error(path, 408)
    headers = [
        *default_headers,
        (b"content-type", response["Content-Type"].encode()),
        (b"content-length", str(len(response.content)).encode()),
        (b"connection", b"close"),
    ]
    return b"".join(
        [STATUS_LINE[408], *(name + b": " + value + b"\r\n" for name, value in headers), b"\r\n", response.content]
    )


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
