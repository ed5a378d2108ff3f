"""The web server's gunicorn worker: uvicorn's, accepting on a listening socket of its own."""

import socket
from contextlib import suppress

from uvicorn_worker import UvicornWorker as BaseUvicornWorker


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
