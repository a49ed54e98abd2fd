"""The HTML report's SLO charts (docs/numbers.md): attainment by local hour per target and the end-to-end
TTFT per candidate at the peak, drawn from a real store and checked on a headless Chromium screenshot."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import numpy as np

from netprobe.report import svg
from netprobe.report.render_html import html
from tests.support.browser import screenshot
from tests.support.report import dataset, slo_report, write_all


def test_attainment_charts_render(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    asyncio.run(write_all(url, dataset(days=8, agents=["sh-ct-1"], targets=("hk-cn2", "us-163"), extras=False,
                                       seed=9)))
    report = asyncio.run(slo_report(url))
    rows = {r.target: r for r in report.rows}
    hk, us = rows["hk-cn2"].slo, rows["us-163"].slo
    assert hk is not None and us is not None and len(hk.hours) == 24 and hk.curve and us.curve
    assert hk.attainment_pct is not None and hk.attainment_pct > 95   # ~60 ms × 3 round trips, some loss
    assert us.attainment_pct is not None and us.attainment_pct < 50   # ~400 ms × 3 at the congested peak
    peak_hours = [v for h, v in enumerate(us.hours) if h in report.window.hours and v is not None]
    night = [v for h, v in enumerate(us.hours) if h in report.offpeak.hours and v is not None]
    assert max(peak_hours) < min(night)                                # the evening dip
    page = tmp_path / "slo.html"
    text = html(report)
    page.write_text(text, encoding="utf-8")
    assert "SLO attainment by hour" in text and "End-to-end time to first token" in text
    assert re.search(r"https?:|<script", text) is None

    pixels = screenshot(page, tmp_path, 1200, 2600)

    def count(colour: str) -> int:
        rgb = np.array([int(colour[i:i + 2], 16) for i in (1, 3, 5)], dtype=np.uint8)
        return int(np.all(pixels == rgb, axis=-1).sum())

    assert count(svg.SLO_MET) > 30 * 300          # the hours within the goal, both targets
    assert count(svg.SLO_MISSED) > 0              # us-163's peak hours below it
    assert count(svg.line_colour("cn2-gia")) > 200 and count(svg.line_colour("163")) > 200   # the curves
