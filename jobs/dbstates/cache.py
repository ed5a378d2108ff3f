"""The state cache's budget: its status, its explanation of a prepare, and LRU eviction.

The budget is ``cache.capacity.maxBytes`` or, when that is null (store-coupled), what the
store's file system can hold beside the states minus ``reserveBytes``. Past the high
watermark (or with less than the reserve free), the least recently used states that are
evictable (no child state, no instance, no running task, older than ``minStateAge``, past
their ``min_retention_until``) are deleted until usage is under the low watermark.
"""

import shutil
import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.db.models import Count, Exists, OuterRef, Q, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from jobs.dbstates import selectors, services
from jobs.dbstates.config import config_value, duration_seconds
from jobs.dbstates.engine import images, prepare_args, statefs, steps
from jobs.dbstates.engine.steps import PrepareRequest
from jobs.dbstates.models import CacheEviction, State
from pipeline_project.api.errors import InvalidInputError, NotFoundError
from pipeline_project.db.snapshot import snapshot


@dataclass
class Usage:
    usage_bytes: int
    configured_max_bytes: int | None
    effective_max_bytes: int
    reserve_bytes: int
    high_watermark: float
    low_watermark: float
    min_state_age: str
    store_total_bytes: int
    store_free_bytes: int

    @property
    def pressure_reasons(self) -> list[str]:
        reasons = []
        if self.usage_bytes > self.high_watermark * self.effective_max_bytes:
            reasons.append("usage_above_high_watermark")
        if self.store_free_bytes < self.reserve_bytes:
            reasons.append("free_below_reserve")
        return reasons

    def relieved(self, freed: int) -> bool:
        return (
            self.usage_bytes - freed <= self.low_watermark * self.effective_max_bytes
            and self.store_free_bytes + freed >= self.reserve_bytes
        )


def _usage() -> Usage:
    capacity = config_value("cache.capacity")
    store = statefs.root()
    store.mkdir(parents=True, exist_ok=True)
    disk = shutil.disk_usage(store)
    used = State.objects.aggregate(total=Coalesce(Sum("size_bytes"), 0))["total"]
    configured = capacity["maxBytes"]
    effective = configured if configured is not None else max(0, used + disk.free - capacity["reserveBytes"])
    return Usage(
        usage_bytes=used,
        configured_max_bytes=configured,
        effective_max_bytes=effective,
        reserve_bytes=capacity["reserveBytes"],
        high_watermark=capacity["highWatermark"],
        low_watermark=capacity["lowWatermark"],
        min_state_age=capacity["minStateAge"],
        store_total_bytes=disk.total,
        store_free_bytes=disk.free,
    )


def evictable_states(min_state_age: str):
    """States that could go now, least recently used first."""
    now = timezone.now()
    return (
        State.objects.annotate(child_count=Count("children", distinct=True), refcount=Count("instances", distinct=True))
        .filter(child_count=0, refcount=0, created_at__lte=now - timedelta(seconds=duration_seconds(min_state_age)))
        .filter(Q(min_retention_until__isnull=True) | Q(min_retention_until__lte=now))
        .exclude(Exists(selectors.running_tasks_on(OuterRef("state_id"))))
        .order_by(Coalesce("last_used_at", "created_at"), "created_at")
    )


@dataclass
class Reclaimable:
    state_count: int
    reclaimable_bytes: int
    blocked_count: int  # states that cannot go now


def _reclaimable(min_state_age: str) -> Reclaimable:
    evictable = evictable_states(min_state_age).aggregate(count=Count("state_id"), size=Coalesce(Sum("size_bytes"), 0))
    state_count = State.objects.count()
    return Reclaimable(state_count, evictable["size"], state_count - evictable["count"])


@snapshot()
def cache_status() -> dict:
    """The cache's figures, every one from the same snapshot of the metadata."""
    usage = _usage()
    reclaimable = _reclaimable(usage.min_state_age)
    last = CacheEviction.objects.first()
    return {
        "usage_bytes": usage.usage_bytes,
        "configured_max_bytes": usage.configured_max_bytes,
        "effective_max_bytes": usage.effective_max_bytes,
        "reserve_bytes": usage.reserve_bytes,
        "high_watermark": usage.high_watermark,
        "low_watermark": usage.low_watermark,
        "min_state_age": usage.min_state_age,
        "store_total_bytes": usage.store_total_bytes,
        "store_free_bytes": usage.store_free_bytes,
        "state_count": reclaimable.state_count,
        "reclaimable_bytes": reclaimable.reclaimable_bytes,
        "blocked_count": reclaimable.blocked_count,
        "pressure_reasons": usage.pressure_reasons,
        "last_eviction": _eviction_summary(last) if last else None,
    }


def _eviction_summary(eviction: CacheEviction) -> dict:
    return {
        "completed_at": selectors.rfc3339(eviction.completed_at),
        **{
            name: getattr(eviction, name)
            for name in (
                "trigger",
                "evicted_count",
                "freed_bytes",
                "blocked_count",
                "reclaimable_bytes",
                "usage_bytes_before",
                "usage_bytes_after",
                "free_bytes_before",
                "free_bytes_after",
            )
        },
    }


def cache_evict(*, trigger: str) -> dict:
    """Evict least recently used states while the cache is under pressure; record the run."""
    usage = _usage()
    if not usage.pressure_reasons:
        return {"evicted": 0}
    freed = evicted = 0
    passed_over: list[str] = []  # blocked meanwhile (a task took it up): not asked again this run
    while not usage.relieved(freed):
        # The least recently used one, asked anew each time: a parent may have become a leaf.
        candidate = evictable_states(usage.min_state_age).exclude(state_id__in=passed_over).first()
        if candidate is None:
            break
        try:
            deleted = services.state_delete(state_id=candidate.state_id).outcome == "deleted"
        except NotFoundError:  # deleted meanwhile by someone else
            deleted = False
        if deleted:
            freed += candidate.size_bytes
            evicted += 1
        else:
            passed_over.append(candidate.state_id)
    after = _usage()
    services.cache_eviction_record(
        trigger=trigger,
        evicted_count=evicted,
        freed_bytes=freed,
        before=usage,
        after=after,
        reclaimable=_reclaimable(after.min_state_age),
    )
    return {"evicted": evicted, "freed_bytes": freed}


def prepare_explain(*, request: PrepareRequest) -> dict:
    """The cache decision a prepare would meet, computed as the job computes it; nothing is kept
    (an lb plan asks Liquibase on a throw-away copy of the base)."""
    normalized = services.prepare_request_check(request=request)
    image = images.image_resolve(request.image_id)
    try:
        planned = steps.steps_plan(normalized, image, workspace=statefs.root() / "tmp" / uuid.uuid4().hex)
    except steps.PlanFailed as exc:
        raise InvalidInputError(str(exc), code="invalid_argument", details={"output": exc.details}) from None
    hashes = [step.task_hash for step in planned]
    state_id = prepare_args.chain([s.step for s in planned], hashes, resolved_image_id=image.resolved_id)[
        -1
    ].output_state_id
    hit = selectors.state_exists(state_id=state_id)
    return {
        "decision": "hit" if hit else "miss",
        "reason_code": "exact_state_match" if hit else "no_matching_state",
        "signature": prepare_args.signature(task_hashes=hashes, resolved_image_id=image.resolved_id, plan_only=False),
        "matched_state_id": state_id if hit else None,
        "resolved_image_id": image.resolved_id,
    }
