"""Time-ordered ids for rows that arrive in time order (``dl_jobs``' primary key)."""

import os
import threading
import time
import uuid

_uuid7_lock = threading.Lock()
_uuid7_last = [0, 0]  # (milliseconds, the 74 random bits) of the last id this process made


def uuid7() -> uuid.UUID:
    """A time-ordered UUID (RFC 9562 version 7): 48-bit Unix milliseconds, then random bits.

    Ids sort by creation, so the primary key serves newest-first listings and inserts land at
    the right edge of its index instead of on random pages. Within one process the ids strictly
    increase (RFC 9562's monotonic random method), so a batch keeps its order.
    """
    candidate = (time.time_ns() // 1_000_000, int.from_bytes(os.urandom(10)) >> 6)
    with _uuid7_lock:
        milliseconds, random_bits = max(candidate, (_uuid7_last[0], _uuid7_last[1] + 1))
        _uuid7_last[:] = milliseconds, random_bits
    rand_a, rand_b = random_bits >> 62, random_bits & ((1 << 62) - 1)
    return uuid.UUID(int=milliseconds << 80 | 0x7 << 76 | rand_a << 64 | 0x2 << 62 | rand_b)
