"""Group commit: the threads that end tasks while a write runs are written together next."""

import threading
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(eq=False)
class _Waiting[Item]:
    item: Item
    woken: threading.Event = field(default_factory=threading.Event)
    written: bool = False
    error: BaseException | None = None


class GroupCommit[Item]:
    """``write(items)`` for the items of many threads, one call for all that came meanwhile.

    A thread that finds no write under way writes its item at once (no lingering: alone, an
    item costs what it did); one that finds a write under way waits, and the first of the
    waiters then writes everything that waits, its own item included. :meth:`add` returns
    once its item is written, or raises what its write raised (then nothing of that write is
    written: the caller may write its item alone).
    """

    def __init__(self, write: Callable[[list[Item]], None]):
        self._write = write
        self._lock = threading.Lock()
        self._waiting: list[_Waiting[Item]] = []
        self._writing = False

    def add(self, item: Item) -> None:
        mine = _Waiting(item)
        with self._lock:
            self._waiting.append(mine)
            leads = not self._writing
            self._writing = True
        if not leads:
            mine.woken.wait()  # written by another thread, or this one's turn to write
        if not mine.written:
            self._write_waiting()
        if mine.error is not None:
            raise mine.error

    def _write_waiting(self) -> None:
        with self._lock:
            batch, self._waiting = self._waiting, []
        error = None
        try:
            self._write([waiting.item for waiting in batch])
        except BaseException as exc:  # noqa: BLE001 - not swallowed: each waiter hears it and decides for its own item
            error = exc
        with self._lock:
            following = self._waiting[0] if self._waiting else None
            self._writing = following is not None
        for waiting in batch:
            waiting.written, waiting.error = True, error
            waiting.woken.set()
        if following is not None:
            following.woken.set()
