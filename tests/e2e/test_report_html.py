"""The HTML report: one self-contained file (no scripts, no external URLs) whose charts really render —
checked on a headless Chromium screenshot (Debian package `chromium`, installed by .ci/run)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import numpy as np
import pytest

from netprobe.report import svg
from netprobe.report.peak import PeakReport, compute
from netprobe.report.render_html import html
from netprobe.store import open_store
from tests.support.browser import screenshot
from tests.support.report import NOW, dataset, write_all

TARGETS = ("hk-cn2", "hk-bgp", "us-163")       # 2 agents × 3 targets: the page fits one 1400×3000 shot


async def _report(url: str) -> PeakReport:
    store = await open_store(url)
    try:
        return await compute(store, days=7, now=NOW)
    finally:
        await store.close()


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("html")
    url = f"sqlite:///{work / 'h.db'}"
    asyncio.run(write_all(url, dataset(days=8, targets=TARGETS, extras=False, seed=9)))
    report = asyncio.run(_report(url))
    assert len(report.rows) == 6
    path = work / "peak.html"
    path.write_text(html(report), encoding="utf-8")
    return path


def test_html_is_one_self_contained_file(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>")
    for pattern in (r"https?:", r"//[a-z0-9]", r"<script", r"<link", r"<iframe", r"<img", r"\bsrc\s*=",
                    r"url\(", r"@import", r"\bhref\s*="):
        assert re.search(pattern, text, re.IGNORECASE) is None, pattern
    assert text.count("<svg") == 6 + 1 + 2              # profiles, heatmap, one line chart per region
    assert text.count("<table>") == 1 and text.count("<tr") == 1 + 6
    assert "sh-ct-1 → hk-bgp" in text and "Loss % by local hour" in text and "Lines compared" in text


def _rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def _where(pixels: np.ndarray, colour: str) -> tuple[int, int, int]:
    """How many pixels have exactly this colour, and the first and last row they are on."""
    mask = np.all(pixels == np.array(_rgb(colour), dtype=np.uint8), axis=-1)
    rows = np.flatnonzero(mask.any(axis=1))
    return int(mask.sum()), int(rows[0]) if rows.size else -1, int(rows[-1]) if rows.size else -1


def test_screenshot_shows_profiles_heatmap_and_lines(page: Path, tmp_path: Path) -> None:
    pixels = screenshot(page, tmp_path, 1400, 3000)
    assert pixels.shape == (3000, 1400, 3)

    # 24-hour profiles: the P5–P95 smoke, the median line, peak and off-peak shading
    band, band_top, band_bottom = _where(pixels, svg.BAND)
    assert band > 6 * 10_000
    assert _where(pixels, svg.MEDIAN)[0] > 6 * 500
    assert _where(pixels, svg.PEAK_SHADE)[0] > 6 * 3_000 and _where(pixels, svg.OFFPEAK_SHADE)[0] > 6 * 3_000
    # the loss heatmap below them: "no loss" cells and loss cells of the congested peak
    no_loss, heat_top, _ = _where(pixels, svg.loss_colour(0.0))
    assert no_loss > 30 * 300 and heat_top > band_bottom
    assert _where(pixels, svg.loss_colour(1.5))[0] + _where(pixels, svg.loss_colour(3.0))[0] > 3 * 300
    # and the line comparison below that: a bar per line in its colour, off-peak bars in grey
    cn2, cn2_top, _ = _where(pixels, svg.line_colour("cn2-gia"))
    assert cn2 > 2 * 500 and cn2_top > heat_top
    assert _where(pixels, svg.line_colour("163"))[0] > 2 * 1_000
    assert _where(pixels, svg.line_colour("bgp"))[0] > 2 * 300
    assert _where(pixels, svg.OFFPEAK_BAR)[0] > 6 * 300
    assert band_top > 0
