"""pgqueuer 1.6 with one no-op entrypoint, drained by ``python -m bench.peers.pgqueuer_app CONCURRENCY``.

(Its CLI, `pgq run`, fails at start in 1.6.0 while configuring logging, so the bench runs the
same PgQueuer.run() the CLI would. pgqueuer refuses max_concurrent_tasks below twice the batch
size, so batches of CONCURRENCY run with 2 × CONCURRENCY tasks allowed, its smallest setting.)
"""

import asyncio
import os
import sys
from datetime import timedelta

import psycopg
from pgqueuer import PgQueuer
from pgqueuer.db import PsycopgDriver
from pgqueuer.types import QueueExecutionMode


async def drain(concurrency: int) -> None:
    connection = await psycopg.AsyncConnection.connect(os.environ["PGDSN"], autocommit=True)
    queuer = PgQueuer(PsycopgDriver(connection))

    @queuer.entrypoint("noop")
    async def noop(job) -> None:
        pass

    await queuer.run(
        mode=QueueExecutionMode.drain,
        batch_size=concurrency,
        max_concurrent_tasks=2 * concurrency,
        dequeue_timeout=timedelta(seconds=1),
    )


if __name__ == "__main__":
    asyncio.run(drain(int(sys.argv[1])))
