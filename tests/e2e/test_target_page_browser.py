"""The dashboard's target page drawn by a real browser (headless Chromium, installed by .ci/run): the
fragment in a minimal page, a screenshot, and the smoke graph's colours found inside its plot."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import numpy as np
import pytest

from netprobe.dashboard import smoke
from netprobe.dashboard.target import target_page as render
from netprobe.report.svg import AXIS, PEAK_SHADE
from netprobe.store import open_store
from tests.support.browser import screenshot
from tests.support.store import AGENT, TARGET
from tests.support.target_page import NOW, colour_for, write

WIDTH, HEIGHT = 1000, 1400


async def _fragment(url: str) -> str:
    store = await open_store(url)
    try:
        got = await render(store, AGENT["id"], TARGET["id"], 7, "/", NOW)
    finally:
        await store.close()
    assert got is not None
    return f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{got[0]}</title></head>" \
           f"<body style=\"margin:8px\">{got[1]}</body></html>"


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("target")
    url = f"sqlite:///{work / 't.db'}"
    asyncio.run(write(url))
    path = work / "target.html"
    path.write_text(asyncio.run(_fragment(url)), encoding="utf-8")
    return path


def _rgb(colour: str) -> np.ndarray:
    return np.array([int(colour[i:i + 2], 16) for i in (1, 3, 5)], dtype=np.uint8)


def _mask(pixels: np.ndarray, colour: str) -> np.ndarray:
    return np.all(pixels == _rgb(colour), axis=-1)


def test_fragment_has_no_external_reference(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    for pattern in (r"https?:", r"<script", r"<link", r"<img", r"\bsrc\s*=", r"url\(", r"@import"):
        assert re.search(pattern, text, re.IGNORECASE) is None, pattern


def test_screenshot_shows_smoke_band_and_loss_coloured_median(page: Path, tmp_path: Path) -> None:
    pixels = screenshot(page, tmp_path, WIDTH, HEIGHT)
    left, right, top, bottom_margin = smoke.BOX
    plot_w, plot_h = smoke.WIDTH - left - right, smoke.HEIGHT - top - bottom_margin
    # the x axis: the one row with a plot-wide run of the axis colour; the plot is the rows above it
    axis_rows = np.flatnonzero(_mask(pixels, AXIS).sum(axis=1) >= plot_w - 2)
    assert len(axis_rows) >= 1, "no x axis drawn"
    bottom = int(axis_rows[0])
    plot = pixels[max(bottom - int(plot_h), 0):bottom]
    counts = {c: int(_mask(plot, c).sum()) for c in (smoke.BAND, *smoke.SMOKE, PEAK_SHADE)}
    assert counts[smoke.BAND] > 400 and all(counts[c] > 400 for c in smoke.SMOKE), counts
    assert counts[PEAK_SHADE] > 3_000, counts        # 7 days: each evening's 20:00–23:00 shaded
    # the median (2 px): mostly loss-free green over 2 days of hours, 6 hours of 2.5 % loss and 3 of 10 %
    green, some, more = (int(_mask(plot, colour_for(v)).sum()) for v in (0.0, 2.5, 10.0))
    assert green > 300 and some > 20 and more > 20, (green, some, more)
    # the hour that lost every echo: a red mark along the plot's top
    red = np.flatnonzero(_mask(plot, colour_for(100.0)).any(axis=1))
    assert len(red) >= 4 and red[-1] < 12, red
