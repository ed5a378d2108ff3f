"""The statuses' colours: every text on its background reaches WCAG AA (4.5:1) in both themes,
and every admin page carries them for both themes."""

import re

import pytest

from jobs.queue.console.templatetags.status_palette import ALIASES, PALETTE
from tests.conftest import ALL_DATABASES

AA = 4.5


def luminance(hex_colour: str) -> float:
    """WCAG 2's relative luminance of an sRGB colour."""
    channels = [int(hex_colour.lstrip("#")[i : i + 2], 16) / 255 for i in (0, 2, 4)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str, b: str) -> float:
    light, dark = sorted((luminance(a), luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def test_the_contrast_formula_gives_the_known_figures():
    assert contrast("#ffffff", "#000000") == pytest.approx(21)
    assert contrast("#ffffff", "#22a06b") == pytest.approx(3.33, abs=0.01)  # the old succeeded badge
    assert contrast("#ffffff", "#3b82f6") == pytest.approx(3.68, abs=0.01)  # the old running badge


@pytest.mark.parametrize("theme", ["light", "dark"])
@pytest.mark.parametrize("status", sorted(PALETTE))
def test_every_status_text_reaches_aa_on_its_colour(status, theme):
    background, text = PALETTE[status][theme]

    assert contrast(background, text) >= AA, (status, theme, round(contrast(background, text), 2))


def test_every_alias_names_a_colour():
    assert set(ALIASES.values()) <= set(PALETTE)


@ALL_DATABASES
def test_every_admin_page_carries_both_themes_colours(admin_client):
    html = admin_client.get("/admin/").content.decode()

    rules = ['html[data-theme="light"], :root {', "@media (prefers-color-scheme: dark)", 'html[data-theme="dark"] {']
    assert all(rule in html for rule in rules)
    assert re.search(r"\.status-badge\.s-succeeded \{ color: var\(--status-succeeded-fg\); \}", html)
    assert "--status-succeeded-bg: #15803d" in html and "--status-succeeded-bg: #4cc38a" in html
