"""What a worker knows of its queues' limits: which claim it uses, when it tries a short queue again,
and the ends it announces."""

import time

from jobs.queue import services
from jobs.queue.models import NOTIFY_CHANNEL
from jobs.queue.worker.limits import LimitedQueues
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.db_helpers import listening
from tests.jobs.conftest import enqueue

pytestmark = ALL_DATABASES_COMMITTED


def test_limited_queues_are_claimed_within_their_limits_and_tried_again_while_jobs_wait():
    services.queue_limits_set(queue="paced", by="test", rate_limit=5, rate_period_sec=1, create=True)
    services.queue_limits_set(queue="capped", by="test", max_running=1, create=True)
    for queue in ("paced", "paced", "paced", "paced", "paced", "paced", "plain", "plain"):
        enqueue(queue=queue, task="t")
    limited = LimitedQueues(["paced", "capped", "plain"])
    assert limited.before_claims(time.monotonic()) == []
    assert "paced" in limited and "capped" in limited and "plain" not in limited

    assert len(limited.claim(queue="paced", limit=10, worker_id="w", floor=None).jobs) == 5
    plain = limited.claim(queue="plain", limit=10, worker_id="w", floor=None)  # the ordinary claim
    assert len(plain.jobs) == 2 and plain.window_head is not None
    before = time.monotonic()
    for queue in ("paced", "capped", "plain"):
        limited.came_up_short(queue)
    [retry] = limited.retry_deadlines()  # paced only: capped is idle (an insert wakes it), plain is not limited
    assert before + 0.2 - 0.05 <= retry <= time.monotonic() + 0.2  # period / rate
    assert limited.before_claims(retry) == ["paced"] and limited.retry_deadlines() == []


def test_ends_of_limited_queues_jobs_are_announced_once():
    services.queue_limits_set(queue="capped", by="test", max_running=1, create=True)
    limited = LimitedQueues(["capped", "plain"])
    limited.before_claims(time.monotonic())
    with listening("default", NOTIFY_CHANNEL) as received:
        limited.ended("capped")
        limited.ended("capped")
        limited.ended("plain")
        limited.before_claims(time.monotonic())
        limited.before_claims(time.monotonic())
        assert received() == ["capped"]


def test_new_limits_are_read_when_they_change():
    limited = LimitedQueues(["q"])
    limited.before_claims(time.monotonic())
    services.queue_limits_set(queue="q", by="test", max_running=2, create=True)
    assert "q" not in limited
    limited.refresh_soon()  # on NOTIFY dl_queues, or the safety sweep
    limited.before_claims(time.monotonic())
    assert "q" in limited
