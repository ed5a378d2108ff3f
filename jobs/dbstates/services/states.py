"""State changes of states: recorded once built, used by a job, invalidated before a rebuild;
and the record of each cache eviction run (the states themselves go through ``deletions``)."""

from typing import TYPE_CHECKING

from django.db.models import F
from django.utils import timezone

from jobs.dbstates.engine import images
from jobs.dbstates.engine.plans import StateExecuteTask
from jobs.dbstates.models import CacheEviction, State

if TYPE_CHECKING:
    from jobs.dbstates.cache import Reclaimable, Usage


def state_record(*, task: StateExecuteTask, image: images.Image, prepare_kind: str, size_bytes: int) -> State:
    """The row of a state just built (its files complete, marker written)."""
    state, _created = State.objects.update_or_create(
        state_id=task.output_state_id,
        defaults={
            "parent_id": task.parent_state_id,
            "image_id": image.resolved_id,
            "engine_version": image.version,
            "prepare_kind": prepare_kind,
            "prepare_args_normalized": task.args_summary,
            "task_hash": task.task_hash,
            "size_bytes": size_bytes,
        },
    )
    return state


def state_use(*, state_id: str) -> None:
    """A job used the state (built or found): its LRU time and use count."""
    State.objects.filter(state_id=state_id).update(last_used_at=timezone.now(), use_count=F("use_count") + 1)


def state_invalidate(*, state_id: str) -> None:
    """The row of a state about to be built again (a row without complete files), unless a child
    state or an instance holds it."""
    State.objects.filter(state_id=state_id, children__isnull=True, instances__isnull=True).delete()


def cache_eviction_record(
    *, trigger: str, evicted_count: int, freed_bytes: int, before: "Usage", after: "Usage", reclaimable: "Reclaimable"
) -> None:
    """One eviction run: what it removed, and the cache's figures before and after."""
    CacheEviction.objects.create(
        trigger=trigger,
        evicted_count=evicted_count,
        freed_bytes=freed_bytes,
        blocked_count=reclaimable.blocked_count,
        reclaimable_bytes=reclaimable.reclaimable_bytes,
        usage_bytes_before=before.usage_bytes,
        usage_bytes_after=after.usage_bytes,
        free_bytes_before=before.store_free_bytes,
        free_bytes_after=after.store_free_bytes,
    )
