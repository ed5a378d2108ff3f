"""The handler bench/jobs_queue.py's latency benchmark runs.

The worker imports it with ``manage.py runworker --handlers bench.latency_handlers``: run from
the checkout's root, ``bench`` is a namespace package on the path next to manage.py.
"""

import time

from jobs.queue.handlers import task


@task("bench.stamp")
def stamp(ctx):
    """Returns the wall-clock time the handler started; the worker stores it in the job's done event."""
    return {"started": time.time()}
