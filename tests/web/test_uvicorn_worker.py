"""The web server's worker: a listening socket of its own per worker (pipeline_project.web.uvicorn_worker)."""

import asyncio
import socket
import time

from pipeline_project.web.uvicorn_worker import own_listener

ROUND_TRIPS = 30


def test_answers_written_in_two_sends_go_out_at_once_under_asyncios_loop():
    """Without TCP_NODELAY on the accepted connection, each answer's second send waits for the
    client's delayed ACK (40 ms on Linux): 30 round trips would take over a second."""
    shared = socket.create_server(("127.0.0.1", 0), reuse_port=True)  # as gunicorn_conf makes it
    own = own_listener(shared, backlog=8)

    async def answer(reader, writer):
        while await reader.readline():
            writer.write(b"head\n")  # as uvicorn sends a response: its head, then its body
            writer.write(b"body\n")
            await writer.drain()
        writer.close()

    async def exchange() -> float:
        server = await asyncio.start_server(answer, sock=own)
        reader, writer = await asyncio.open_connection(*own.getsockname()[:2])
        started = time.perf_counter()
        for _ in range(ROUND_TRIPS):
            writer.write(b"ask\n")
            assert await reader.readline() == b"head\n"
            assert await reader.readline() == b"body\n"
        elapsed = time.perf_counter() - started
        writer.close()
        server.close()
        return elapsed

    try:
        elapsed = asyncio.run(exchange(), loop_factory=asyncio.SelectorEventLoop)  # not the suite's uvloop
    finally:
        shared.close()
        own.close()

    assert elapsed < 0.5, f"{ROUND_TRIPS} round trips took {elapsed:.2f} s: answers wait for delayed ACKs"
