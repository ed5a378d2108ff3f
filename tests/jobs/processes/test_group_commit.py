"""Group commit: items that come while a write runs are written together, each exactly once."""

import threading
import time

import pytest

from jobs.processes.group_commit import GroupCommit


def test_items_added_during_a_write_go_together_in_the_next_and_each_add_returns_once_written():
    writes: list[list[int]] = []
    first_write_started = threading.Event()
    release_first = threading.Event()

    def write(items):
        writes.append(list(items))
        if len(writes) == 1:
            first_write_started.set()
            release_first.wait(5)

    group = GroupCommit(write)
    returned: list[int] = []

    def add(n):
        group.add(n)
        returned.append(n)
        assert any(n in written for written in writes)  # never before its write

    first = threading.Thread(target=add, args=(0,))
    first.start()
    assert first_write_started.wait(5)
    others = [threading.Thread(target=add, args=(n,)) for n in range(1, 9)]
    for other in others:
        other.start()
    time.sleep(0.2)  # all eight wait behind the first write
    assert returned == []
    release_first.set()
    for thread in [first, *others]:
        thread.join(5)

    assert len(writes) == 2 and writes[0] == [0] and sorted(writes[1]) == list(range(1, 9))
    assert sorted(returned) == list(range(9))


def test_a_refused_write_is_raised_to_each_of_its_items_and_the_next_write_goes_on():
    def write(items):
        if "bad" in items:
            raise ValueError("refused")

    group = GroupCommit(write)
    with pytest.raises(ValueError, match="refused"):
        group.add("bad")
    group.add("good")


def test_many_threads_adding_at_once_all_return_and_no_item_is_written_twice():
    written: list[int] = []
    group = GroupCommit(lambda items: (time.sleep(0.001), written.extend(items)))
    threads = [threading.Thread(target=lambda n=n: [group.add(n * 100 + i) for i in range(50)]) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert sorted(written) == sorted(n * 100 + i for n in range(16) for i in range(50))
