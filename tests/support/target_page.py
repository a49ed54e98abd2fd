"""The dashboard's target page on a real store (no tests here): a pair measured through Store.write (icmp
with known losses and gaps, tcp, sse, mtr and rmtr routes that change), what the page should show worked
out from the store without the page's code, and readers of the page's SVG, tables and lists.

The agent is in Asia/Shanghai (UTC+8, no DST): local bucket edges are worked out by hand here."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from html import unescape
from typing import Any

from netprobe.store import Rollup, Store, open_store
from tests.support.path_events import C163, CN2, GT, GT2, mtr_envelope
from tests.support.report import sse, tcp
from tests.support.store import AGENT, TARGET, hourly, icmp_envelope, typed

NOW = datetime(2026, 11, 20, 12, 34, tzinfo=UTC)          # 20:34 in Shanghai
HOUR = timedelta(hours=1)
OFFSET_S = 8 * 3600                                       # Asia/Shanghai
END = NOW.replace(minute=0) + HOUR                        # the spans end with the current hour
GAP = range(16, 21)                                       # hours ago without any round
ALL_LOST = 30                                             # hours ago: every echo lost
OLD = (40 * 24 + 3, 41 * 24, 60 * 24 + 7, 85 * 24 + 1)    # hours ago with one round, far back
ECHOES = 20


def hour_ago(k: int) -> datetime:
    return END - (k + 1) * HOUR


def lost_in(k: int) -> int:
    """Echoes lost in the hour k hours ago (of 2 × ECHOES): 0 mostly; 1 (2.5 %) or 4 (10 %) in some."""
    if k == ALL_LOST:
        return 2 * ECHOES
    return 4 if k % 11 == 5 else 1 if k % 7 == 3 else 0


def rtt(k: int, i: int) -> float:
    """Echo i of the hour k hours ago: a spread that moves with the hour, so buckets differ."""
    return 30.0 + (k % 9) * 2.5 + (i % 20) * 0.9 + (i * 7 % 5) * 0.37


def icmp_hour(k: int) -> list[dict[str, Any]]:
    """Two rounds of ECHOES in the hour k hours ago, `lost_in(k)` echoes lost (the last ones)."""
    samples: list[float | None] = [rtt(k, i) for i in range(2 * ECHOES)]
    for i in range(lost_in(k)):
        samples[-1 - i] = None
    at = hour_ago(k)
    return [icmp_envelope(at + timedelta(minutes=10), samples[:ECHOES]),
            icmp_envelope(at + timedelta(minutes=40), samples[ECHOES:])]


def icmp_hours() -> list[int]:
    return [k for k in range(48) if k not in GAP] + list(OLD)


ROUTES = [  # (hours ago, probe, trace)
    (36, "mtr", CN2), (26, "mtr", C163), (6, "mtr", CN2),
    (35, "rmtr", GT), (3, "rmtr", GT2),
]


def dataset() -> list[dict[str, Any]]:
    envs: list[dict[str, Any]] = []
    for k in icmp_hours():
        envs += icmp_hour(k)
    for k in range(48):
        at = hour_ago(k) + timedelta(minutes=20)
        connects = [20.0 + k % 5 + i * 1.5 if (k + i) % 13 else None for i in range(5)]
        envs.append(tcp(at, AGENT["id"], TARGET["id"], connects))
        envs.append(sse(at + timedelta(minutes=1), AGENT["id"], TARGET["id"], 100.0 + 3.0 * (k % 17),
                        1 if k % 4 == 0 else 0, 30.0))
    for k, probe, trace in ROUTES:
        envs.append(mtr_envelope(hour_ago(k) + timedelta(minutes=30), trace, probe=probe))
    return envs


async def write(url: str) -> None:
    store = await open_store(url)
    try:
        envs = dataset()
        routes = [e for e in envs if e["probe"] in ("mtr", "rmtr")]
        await store.write(typed([e for e in envs if e["probe"] not in ("mtr", "rmtr")]))
        for e in sorted(routes, key=lambda e: str(e["started_at"])):   # one at a time, as an agent does
            await store.write(typed([e]))
        folded = await store.fold_rollups(now=NOW)       # the collector's hourly upkeep, at NOW
        assert folded.rows > 0
    finally:
        await store.close()


# -- what the page should show, worked out from the store without the page's code --------------------
def bucket_key(at: datetime, hours: int) -> int:
    """The local-clock bucket an hour starting at `at` falls in (Shanghai: UTC+8, no DST)."""
    return (int(at.timestamp()) + OFFSET_S) // (hours * 3600)


async def expected_buckets(store: Store, days: int, hours: int) -> dict[int, tuple[Rollup, list[int]]]:
    """Per bucket key: the DDSketch merge of its hour rows (Rollup.merge) and the hours-ago it holds."""
    rows = await hourly(store, AGENT["id"], TARGET["id"], "icmp", END - timedelta(days=days + 1), END)
    out: dict[int, tuple[Rollup, list[int]]] = {}
    first = bucket_key(END - timedelta(days=days), hours)    # the first bucket holds the span's start
    for row in rows:
        key = bucket_key(row.hour, hours)
        if key < first:
            continue
        merged, ks = out.setdefault(key, (Rollup(), []))
        merged.merge(row.rollup)
        ks.append(round((END - row.hour) / HOUR) - 1)
    return out


# SmokePing-style steps the page promises (upper bounds in %, colour)
LOSS_COLOURS = ((0.0, "#26ff00"), (0.5, "#00b8ff"), (1.0, "#0059ff"), (2.0, "#5e00ff"), (5.0, "#7e00ff"),
                (20.0, "#dd00ff"), (math.inf, "#ff0000"))


def colour_for(loss: float) -> str:
    return next(c for bound, c in LOSS_COLOURS if loss <= bound)


# -- reading the page ----------------------------------------------------------------------------------
class Chart:
    """The smoke graph's geometry, as its SVG states it."""

    def __init__(self, fragment: str) -> None:
        svg = re.search(r'<svg class="smoke-graph"[^>]*>', fragment)
        assert svg is not None
        head = svg.group(0)
        self.y_top = float(_attr(head, "data-y-top"))
        self.t0, self.t1 = float(_attr(head, "data-t0")), float(_attr(head, "data-t1"))
        self.left, self.top, self.width, self.height = map(float, _attr(head, "data-plot").split())
        self.body = fragment[svg.end():fragment.index("</svg>", svg.end())]

    def y(self, ms: float) -> float:
        return self.top + self.height - ms / self.y_top * self.height

    def at(self, x: float) -> datetime:
        """The instant at x, to the nearest hour (a drawn coordinate has 0.1 px)."""
        t = self.t0 + (x - self.left) / self.width * (self.t1 - self.t0)
        return datetime.fromtimestamp(round(t / 3600) * 3600, UTC)

    def medians(self) -> list[tuple[datetime, datetime, float, str]]:
        """Each median step: (bucket start, end, y, colour)."""
        out = []
        for m in re.finditer(r'<path class="median" d="M([\d.]+),([\d.]+)(?:V([\d.]+))?H([\d.]+)"[^>]*'
                             r'stroke="(#[0-9a-f]{6})"', self.body):
            x0, y0, yv, x1, colour = m.groups()
            out.append((self.at(float(x0)), self.at(float(x1)), float(yv or y0), colour))
        return out

    def layers(self, q: str) -> list[list[tuple[float, float]]]:
        """The polygons of one smoke layer ("0.05-0.95", …), each as its points."""
        out = []
        for m in re.finditer(rf'<polygon class="smoke" data-q="{re.escape(q)}" points="([^"]+)"', self.body):
            out.append([tuple(map(float, p.split(","))) for p in m.group(1).split()])  # type: ignore[misc]
        return out

    def lost_marks(self) -> list[tuple[datetime, datetime]]:
        return [(self.at(float(x)), self.at(float(x) + float(w))) for x, w in
                re.findall(r'<rect class="all-lost" x="([\d.]+)" y="[\d.]+" width="([\d.]+)"', self.body)]


def _attr(tag: str, name: str) -> str:
    m = re.search(rf'{name}="([^"]*)"', tag)
    assert m is not None, name
    return m.group(1)


def table(fragment: str, probe: str) -> dict[str, tuple[str, str]]:
    m = re.search(rf'<table class="figures" data-probe="{probe}">(.*?)</table>', fragment)
    assert m is not None, probe
    return {unescape(name): (a, b) for name, a, b in
            re.findall(r"<tr><th>([^<]*)</th><td>([^<]*)</td><td>([^<]*)</td></tr>", m.group(1))}


def history(fragment: str, direction: str) -> list[str]:
    """The items of one direction's list, as text."""
    m = re.search(rf'<ol class="path-history" data-direction="{direction}">(.*?)</ol>', fragment)
    if m is None:
        return []
    return [unescape(re.sub(r"<[^>]+>", "", li)) for li in re.findall(r"<li[^>]*>(.*?)</li>", m.group(1))]


def close(a: float, b: float) -> bool:
    return abs(a - b) <= 0.051          # coordinates are written to 0.1 px


def runs(keys: Iterable[int]) -> list[list[int]]:
    out: list[list[int]] = []
    for k in keys:
        if out and out[-1][-1] == k - 1:
            out[-1].append(k)
        else:
            out.append([k])
    return out
