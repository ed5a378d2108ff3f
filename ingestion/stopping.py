"""How a step stops when its job does: the job's stop event (``ctx.signals.stopped``: canceled,
or its lease lost) is passed down to every wait, fetch and page loop, which raise
:class:`Stopped` as soon as it is set; the job handler then ends the job as the signal says."""

import threading

NEVER = threading.Event()  # the stop event of work that no job can stop (a direct call, a test)


class Stopped(Exception):
    """The job was stopped while the step waited, fetched or read."""
