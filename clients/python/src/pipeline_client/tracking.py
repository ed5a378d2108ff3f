"""Seed 000's tracking: files registered with their shards, each (file, shard) moved through
event-ingest → shard-splitter → shard-worker → mysql-sender, and a stage daemon's loop in one call."""

import logging
import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from urllib.parse import quote

from pipeline_client.errors import ConflictError, ConnectionFailedError, UnavailableError
from pipeline_client.models import (
    EventIngestDone,
    FileStatus,
    QueueItem,
    Registration,
    Summary,
    Transition,
    WorkReport,
    parsed,
    to_json,
)
from pipeline_client.session import Session

logger = logging.getLogger("pipeline_client")

PIPELINE = "api/v1/pipeline"
QUEUE_PAGE = 100  # the queue's default page; it takes up to 1000


class Tracking:
    def __init__(self, session: Session):
        self._session = session

    def register(self, filename: str, shards: list[int]) -> Registration:
        """Event ingest: one row per shard, event-ingest ``started`` (idempotent; new shards are added)."""
        body = {"filename": filename, "shards": list(shards)}
        return parsed(Registration, self._session.call("POST", f"{PIPELINE}/files/register", json=body))

    def event_ingest_done(self, filename: str) -> EventIngestDone:
        """Event ingest: the file is generated; its shards become ready for shard-splitter."""
        answer = self._session.call("POST", f"{PIPELINE}/stages/event-ingest/done", json={"filename": filename})
        return parsed(EventIngestDone, answer)

    def move(self, stage: str, transition: str, filename: str, shard: int) -> Transition:
        """``transition`` (start, done, fail or retry) of one shard at a queue stage. A repeat changes
        nothing; any other illegal move is a :class:`ConflictError` naming the current status."""
        path = f"{PIPELINE}/stages/{quote(stage, safe='')}/{quote(transition, safe='')}"
        return parsed(Transition, self._session.call("POST", path, json={"filename": filename, "shard": shard}))

    def start(self, stage: str, filename: str, shard: int) -> Transition:
        return self.move(stage, "start", filename, shard)

    def done(self, stage: str, filename: str, shard: int) -> Transition:
        return self.move(stage, "done", filename, shard)

    def fail(self, stage: str, filename: str, shard: int) -> Transition:
        return self.move(stage, "fail", filename, shard)

    def retry(self, stage: str, filename: str, shard: int) -> Transition:
        """failed → new: the shard is back in the stage's queue."""
        return self.move(stage, "retry", filename, shard)

    def queue(
        self, stage: str, *, limit: int = QUEUE_PAGE, updated_since: datetime | None = None
    ) -> Iterator[QueueItem]:
        """The rows ready for ``stage``, oldest first, read ``limit`` at a time (by offset, as the seed
        pages: rows that change meanwhile may be skipped or seen twice; daemons claim instead)."""
        params = {"limit": limit, "offset": 0}
        if updated_since is not None:
            params["updated_since"] = to_json(updated_since)
        while True:
            items = self._session.call("GET", f"{PIPELINE}/queues/{quote(stage, safe='')}", params=params)["items"]
            yield from (parsed(QueueItem, item) for item in items)
            if len(items) < limit:
                return
            params["offset"] += limit

    def claim(self, stage: str, *, limit: int = 1) -> list[QueueItem]:
        """Take up to ``limit`` ready rows; they are ``started`` and no other daemon gets them. Not
        retried once the request may have reached the service: a repeat would take other rows."""
        path = f"{PIPELINE}/queues/{quote(stage, safe='')}/claim"
        answer = self._session.call("POST", path, json={"limit": limit}, idempotent=False)
        return [parsed(QueueItem, item) for item in answer["items"]]

    def file(self, filename: str) -> FileStatus:
        """Every shard's four statuses."""
        return parsed(FileStatus, self._session.call("GET", f"{PIPELINE}/files/{quote(filename, safe='')}"))

    def summary(self) -> Summary:
        return parsed(Summary, self._session.call("GET", f"{PIPELINE}/metrics/summary"))

    def work(
        self,
        stage: str,
        handler: Callable[[QueueItem], object],
        *,
        batch_size: int = 10,
        poll_interval: float = 1.0,
        stop: threading.Event | None = None,
        stop_when_idle: bool = False,
    ) -> WorkReport:
        """A stage daemon's loop: claim up to ``batch_size`` rows, call ``handler(item)`` on each, and
        mark it done, or failed when the handler raised (logged with its traceback). With nothing to
        claim it waits ``poll_interval`` (or returns, ``stop_when_idle``), as it does when the service
        is unreachable or unavailable. Setting ``stop`` (say from
        a SIGTERM handler) ends it after the item in hand: the rest of the batch goes back to the
        queue (fail, then retry), as it does when the handler is interrupted (KeyboardInterrupt)."""
        stop = stop or threading.Event()
        report = WorkReport()
        while not stop.is_set():
            try:
                items = self.claim(stage, limit=batch_size)
            except (UnavailableError, ConnectionFailedError) as exc:  # a daemon outlives the service's outages
                logger.warning("%s: cannot claim (%s); trying again in %s s", stage, exc, poll_interval)
                stop.wait(poll_interval)
                continue
            if items:
                self._work_batch(stage, handler, items, stop, report)
            elif stop_when_idle:
                break
            else:
                stop.wait(poll_interval)
        return report

    def _work_batch(self, stage, handler, items: list[QueueItem], stop: threading.Event, report: WorkReport) -> None:
        pending = list(items)
        try:
            while pending and not stop.is_set():
                self._work_item(stage, handler, pending[0], report)
                pending.pop(0)
        finally:
            for item in pending:
                self._release(stage, item)

    def _work_item(self, stage: str, handler, item: QueueItem, report: WorkReport) -> None:
        try:
            handler(item)
        except Exception as exc:
            logger.warning("%s failed on %s shard %s", stage, item.filename, item.shard, exc_info=True)
            if self._mark(stage, "fail", item, report):
                report.failed.append((item, f"{type(exc).__name__}: {exc}"))
        else:
            if self._mark(stage, "done", item, report):
                report.done.append(item)

    def _mark(self, stage: str, transition: str, item: QueueItem, report: WorkReport) -> bool:
        """Whether the move was made; a row someone else moved meanwhile (an operator) is left as it is."""
        try:
            self.move(stage, transition, item.filename, item.shard)
        except ConflictError as exc:
            logger.warning("%s: %s shard %s was moved meanwhile: %s", stage, item.filename, item.shard, exc)
            report.conflicts.append(item)
            return False
        return True

    def _release(self, stage: str, item: QueueItem) -> None:
        """A claimed row not worked on, back to ``new``: started rows can only leave by failing."""
        try:
            self.move(stage, "fail", item.filename, item.shard)
            self.move(stage, "retry", item.filename, item.shard)
        except ConflictError:
            logger.warning("%s: %s shard %s was moved meanwhile; not released", stage, item.filename, item.shard)
