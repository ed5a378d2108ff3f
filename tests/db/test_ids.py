"""Time-ordered ids: version 7 UUIDs that strictly increase within a process."""

import time
import uuid

from pipeline_project.db.ids import uuid7


def test_uuid7_is_time_ordered_and_well_formed():
    first = uuid7()
    time.sleep(0.002)
    later = [uuid7() for _ in range(1000)]  # many within one millisecond

    assert all(value.version == 7 and value.variant == uuid.RFC_4122 for value in [first, *later])
    assert later == sorted(later) and len(set(later)) == 1000  # strictly increasing
    assert all(value > first for value in later)
    assert abs(int(later[0].hex[:12], 16) - time.time() * 1000) < 5000  # the prefix is the time in ms
