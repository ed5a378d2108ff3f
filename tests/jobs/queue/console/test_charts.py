"""The throughput charts' shape: round y-axis values, a window's buckets at round local times,
stacked columns scaled to the top tick, time labels, the totals per finished status."""

from datetime import timedelta
from itertools import pairwise

import pytest
from django.utils import timezone

from jobs.queue.console import charts


@pytest.mark.parametrize(
    ("peak", "intervals", "ticks"),
    [
        (0, 4, [0, 1]),
        (1, 4, [0, 1]),
        (4, 4, [0, 1, 2, 3, 4]),
        (7, 4, [0, 2, 4, 6, 8]),
        (10, 4, [0, 5, 10]),
        (2_345, 4, [0, 1000, 2000, 3000]),
        (7, 1, [0, 10]),
        (3, 1, [0, 5]),
    ],
)
def test_the_y_axis_takes_round_steps_up_to_the_peak(peak, intervals, ticks):
    assert charts.round_scale(peak, intervals=intervals) == ticks


def test_an_unknown_window_is_the_last_hour():
    assert charts.window_of("week").buckets == 168
    assert charts.window_of(None) == charts.window_of("decade") == charts.WINDOWS["hour"]


@pytest.mark.parametrize("name", ["hour", "day", "week"])
def test_a_windows_buckets_end_now_at_round_local_times(settings, name):
    settings.TIME_ZONE = "Europe/Prague"
    window = charts.WINDOWS[name]

    buckets = charts.Buckets.now(window)

    now = timezone.now()
    assert len(buckets.starts) == window.buckets and buckets.starts[-1] <= now < buckets.starts[-1] + window.step
    assert all(later - earlier == window.step for earlier, later in pairwise(buckets.starts))
    local = timezone.localtime(buckets.starts[-1])
    assert (local.hour * 60 + local.minute) % (window.step // timedelta(minutes=1)) == 0


def test_columns_stack_in_status_order_scaled_to_the_top_tick_with_their_totals():
    buckets = charts.Buckets.now(charts.WINDOWS["hour"])
    last = buckets.starts[-1]

    chart = charts.chart(buckets, {last: {"canceled": 1, "succeeded": 6}})

    column = chart["columns"][-1]
    assert [(s["status"], s["count"], s["percent"]) for s in column["segments"]] == [
        ("succeeded", 6, 75.0),
        ("canceled", 1, 12.5),
    ]
    assert [tick["value"] for tick in chart["ticks"]] == [0, 2, 4, 6, 8]
    assert chart["totals"] == {"succeeded": 6, "failed": 0, "canceled": 1, "lost": 0}
    assert chart["busy"] == [column] and chart["unit"] == "jobs/min"
    assert chart["summary"] == "6 succeeded, 0 failed, 1 canceled, 0 lost in the last hour"
    labels = [c["label"] for c in chart["columns"] if c["label"]]
    assert labels and all(int(label[-2:]) % 15 == 0 for label in labels)  # every quarter hour


def test_all_queues_add_up():
    a, b = timezone.now(), timezone.now() - timedelta(minutes=1)
    per_queue = {"x": {a: {"succeeded": 1}}, "y": {a: {"succeeded": 2, "lost": 1}, b: {"failed": 4}}}

    assert charts.summed(per_queue) == {a: {"succeeded": 3, "lost": 1}, b: {"failed": 4}}
