"""The console's live times and copyable texts as the server draws them: the relative text, the
absolute time to the second with its zone in the title, the full text on hover and in the button."""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from pipeline_project.web.times import ago, copyable_html, countdown_html, duration, moment_html

NOW = datetime(2026, 12, 2, 9, 15, 3, 500000, tzinfo=UTC)


@pytest.fixture(autouse=True)
def frozen_now(monkeypatch):
    monkeypatch.setattr(timezone, "now", lambda: NOW)


@pytest.mark.parametrize(
    ("offset", "text"),
    [
        (timedelta(seconds=-12), "12 s ago"),
        (timedelta(minutes=-3, seconds=-59), "3 min ago"),
        (timedelta(hours=-2), "2 h ago"),
        (timedelta(days=-5), "5 d ago"),
        (timedelta(minutes=3, seconds=1), "in 3 min"),
    ],
)
def test_a_moment_reads_as_its_largest_unit_with_the_absolute_time_in_its_title(offset, text):
    moment = NOW + offset
    html = moment_html(moment)

    assert html == (
        f'<time class="moment" datetime="{moment.isoformat()}" title="{moment:%Y-%m-%d %H:%M:%S} UTC">{text}</time>'
    )


@pytest.mark.parametrize(
    ("offset", "text"),
    [
        (timedelta(minutes=4, seconds=10), "in 4 min 10 s"),
        (timedelta(seconds=9), "in 9 s"),
        (timedelta(hours=2, minutes=5), "in 2 h 5 min"),
        (timedelta(days=3, hours=4), "in 3 d 4 h"),
        (timedelta(seconds=-12), "12 s ago"),
    ],
)
def test_a_countdown_reads_to_the_second_and_says_ago_once_past(offset, text):
    moment = NOW + offset

    assert countdown_html(moment) == (
        f'<time class="countdown" datetime="{moment.isoformat()}" title="{moment:%Y-%m-%d %H:%M:%S} UTC">{text}</time>'
    )


def test_the_title_states_the_current_time_zone():
    with timezone.override("Europe/Prague"):
        assert 'title="2026-12-02 10:15:03 CET"' in moment_html(NOW)


def test_no_time_reads_as_a_dash():
    assert moment_html(None) == countdown_html(None) == "–"


def test_a_copyable_text_shows_its_short_form_and_copies_all_of_it_escaped():
    html = copyable_html("0192<f3>-445566", "…445566")

    assert html.startswith('<span class="copyable" title="0192&lt;f3&gt;-445566">')
    assert '<span class="copyable-text">…445566</span>' in html
    assert 'data-copy="0192&lt;f3&gt;-445566"' in html and "<f3>" not in html
    assert '<span class="visually-hidden">Copy</span>' in html  # the button's name for screen readers
    assert '<span class="copyable-text">abc</span>' in copyable_html("abc") and copyable_html("") == "–"


def test_durations_and_ago_read_as_before():
    assert [duration(timedelta(seconds=s)) for s in (0.85, 4.2, 185, 7800, 200000)] == [
        "850 ms",
        "4.2 s",
        "3 min 5 s",
        "2 h 10 min",
        "2 d 7 h",
    ]
    assert ago(NOW - timedelta(seconds=30)) == "30 s ago" and ago(NOW + timedelta(seconds=5)) == "just now"
