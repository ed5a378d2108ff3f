"""Where a worker's claims of each queue start reading: a floor, while claims from the head are slow.

A claim that reads a queue from its head walks every index entry of the jobs claimed since the
oldest snapshot still held: none may be removed while a long transaction or a REPEATABLE READ
reader holds the xmin, so claims grow slower with every job claimed (``jobs_claim_from``). After
a claim from the head that took ``claim_floor_after_sec`` or longer, a queue's claims start at the
head of the last claim's window instead, and walk only the entries of the jobs claimed since.
Jobs that become available behind that floor (a retry, a job coming due or put back, a higher
priority) are claimed by the next read from the head: at most ``FULL_READ_SHARE`` of the time goes
to those, and never less than ``MIN_FULL_READ_SEC`` passes between them. A fast read from the head
ends it: a queue's claims read from the head whenever that costs little.
"""

from jobs.queue import services
from jobs.queue.worker.alarms import QueueAlarms

MIN_FULL_READ_SEC = 1.0
FULL_READ_SHARE = 0.05


class ClaimFloors:
    """The control thread's (it alone writes); handler threads call only :meth:`floor`, whose two
    lookups are single dict reads."""

    def __init__(self, *, claim_floor_after_sec: float):
        self.claim_floor_after_sec = claim_floor_after_sec
        self._floors: dict[str, services.ClaimFloor] = {}  # read by handler threads: replaced, never changed
        self._full_read_at: dict[str, float] = {}  # monotonic time a queue's next claim reads from its head
        self.alarms = QueueAlarms()  # a drained queue's next read from the head: nothing else wakes it

    def floor(self, queue: str, now: float) -> services.ClaimFloor | None:
        """Where a claim of ``queue`` starts now (None: at its head)."""
        if now >= self._full_read_at.get(queue, 0.0):
            return None
        return self._floors.get(queue)

    def claimed(
        self,
        queue: str,
        *,
        floor: services.ClaimFloor | None,
        window_head: services.ClaimFloor | None,
        seconds: float,
        now: float,
    ) -> None:
        """A claim of ``queue`` from ``floor`` ended at ``now``, after ``seconds``; its window began
        at ``window_head``."""
        if floor is None:
            if seconds < self.claim_floor_after_sec:
                self._floors.pop(queue, None)
                self._full_read_at.pop(queue, None)
                return
            self._full_read_at[queue] = now + max(MIN_FULL_READ_SEC, seconds / FULL_READ_SHARE)
        if window_head is not None:  # else nothing after the floor was available: it stays
            self._floors[queue] = window_head
        if floor is None and queue in self._floors:  # only a floor can leave jobs behind for the alarm
            self.alarms.set(queue, self._full_read_at[queue])
