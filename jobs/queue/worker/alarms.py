"""Per-queue alarms of the control loop: a queue to claim from again at a time nothing else marks
(no NOTIFY fires then). Each goes off once."""


class QueueAlarms:
    def __init__(self):
        self._at: dict[str, float] = {}  # monotonic time each queue's alarm goes off

    def set(self, queue: str, at: float) -> None:
        self._at[queue] = at

    def deadlines(self) -> list[float]:
        return list(self._at.values())

    def due(self, now: float) -> list[str]:
        """The queues whose alarm went off by ``now`` (each once)."""
        queues = [queue for queue, at in self._at.items() if at <= now]
        for queue in queues:
            del self._at[queue]
        return queues
