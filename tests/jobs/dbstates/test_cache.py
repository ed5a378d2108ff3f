"""The cache budget: status figures and least-recently-used eviction of unreferenced states."""

from datetime import timedelta

from django.utils import timezone

from jobs.dbstates import cache, config, deletion_tree, services
from jobs.dbstates.models import CacheEviction, Instance, State
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.jobs.dbstates.helpers import prepared

pytestmark = ALL_DATABASES_COMMITTED


def unreferenced_state(sql: str) -> State:
    job = prepared(["-c", sql])
    services.instance_delete(instance_id=job.result["instance_id"], force=True)
    return State.objects.get(state_id=job.result["state_id"])


def test_status_reports_usage_and_what_could_be_reclaimed():
    kept = prepared(["-c", "CREATE TABLE in_use (a int)"])
    config.config_set(path="cache.capacity.minStateAge", value="0s")
    free = unreferenced_state("CREATE TABLE free (a int)")

    status = cache.cache_status()

    assert status["state_count"] == 2 and status["usage_bytes"] == sum(
        State.objects.values_list("size_bytes", flat=True)
    )
    assert status["reclaimable_bytes"] == free.size_bytes and status["blocked_count"] == 1
    assert status["configured_max_bytes"] is None and status["effective_max_bytes"] > 0
    assert Instance.objects.filter(instance_id=kept.result["instance_id"]).exists()


def test_eviction_removes_least_recently_used_unreferenced_states_down_to_the_low_watermark():
    old = unreferenced_state("CREATE TABLE old (a int)")
    recent = unreferenced_state("CREATE TABLE recent (a int)")
    in_use = prepared(["-c", "CREATE TABLE in_use (a int)"]).result["state_id"]
    State.objects.filter(pk=old.pk).update(last_used_at=timezone.now() - timedelta(hours=2))
    State.objects.filter(pk=recent.pk).update(last_used_at=timezone.now() - timedelta(hours=1))
    size = old.size_bytes
    config.config_set(path="cache.capacity.minStateAge", value="0s")
    # Room for two and a half states: three are over the high watermark; the low one leaves room for two.
    config.config_set(path="cache.capacity.maxBytes", value=int(size * 2.5))
    config.config_set(path="cache.capacity.highWatermark", value=0.9)
    config.config_set(path="cache.capacity.lowWatermark", value=0.85)

    outcome = cache.cache_evict(trigger="test")

    assert outcome["evicted"] == 1
    assert set(State.objects.values_list("state_id", flat=True)) == {recent.state_id, in_use}
    eviction = CacheEviction.objects.get()
    assert eviction.trigger == "test" and eviction.evicted_count == 1 and eviction.freed_bytes == size
    assert cache.cache_status()["last_eviction"]["evicted_count"] == 1


def test_young_states_are_not_evicted():
    unreferenced_state("CREATE TABLE young (a int)")
    config.config_set(path="cache.capacity.maxBytes", value=1)

    assert cache.cache_evict(trigger="test")["evicted"] == 0
    assert State.objects.count() == 1


def test_a_state_blocked_meanwhile_is_passed_over_not_asked_again(monkeypatch):
    unreferenced_state("CREATE TABLE raced (a int)")
    config.config_set(path="cache.capacity.minStateAge", value="0s")
    config.config_set(path="cache.capacity.maxBytes", value=1)
    asked = []

    def blocked(*, state_id, **flags):  # as if a prepare had taken the state up since the query
        asked.append(state_id)
        return deletion_tree.DeleteResult(dry_run=False, outcome="blocked", root=deletion_tree.Node("state", state_id))

    monkeypatch.setattr(services, "state_delete", blocked)

    assert cache.cache_evict(trigger="test")["evicted"] == 0
    assert len(asked) == 1 and State.objects.count() == 1
