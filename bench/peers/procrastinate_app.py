"""procrastinate 3.10 with one no-op task; ``drain(concurrency)`` runs its worker until the queue is empty."""

import asyncio
import os

from procrastinate import App, PsycopgConnector

app = App(connector=PsycopgConnector(conninfo=os.environ.get("PROCRASTINATE_DSN", "")))


@app.task(name="noop")
async def noop() -> None:
    pass


async def _drain(concurrency: int) -> None:
    async with app.open_async():
        await app.run_worker_async(concurrency=concurrency, wait=False, install_signal_handlers=False)


def drain(concurrency: int) -> None:
    asyncio.run(_drain(concurrency))
