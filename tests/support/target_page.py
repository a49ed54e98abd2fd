"""The dashboard's target page on a real store, run on each database by a subclass that provides the
`url` fixture (SQLite in unit/dashboard, PostgreSQL in pg/): a pair measured through Store.write (icmp
with known losses and gaps, tcp, sse, mtr and rmtr routes that change), and the page's SVG and tables
checked against the store's own merges (Rollup.merge of DDSketches, Store.window_stats).

The agent is in Asia/Shanghai (UTC+8, no DST): local bucket edges are worked out by hand here."""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import AsyncIterator, Iterable
from datetime import UTC, datetime, timedelta
from html import unescape
from typing import Any

import pytest

from netprobe.dashboard.target import render
from netprobe.store import Rollup, Store, open_store
from tests.support.path_events import C163, CN2, GT, GT2, mtr_envelope
from tests.support.report import sse, tcp
from tests.support.store import AGENT, TARGET, icmp_envelope, typed

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
    rows = await store.hourly(AGENT["id"], TARGET["id"], "icmp", END - timedelta(days=days + 1), END)
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


class TargetPageScenarios:
    """Every scenario runs on each database; a subclass provides the `url` fixture (class-scoped: the
    data is written once, the tests only read, but for another pair's)."""

    @pytest.fixture(scope="class")
    def written(self, url: str) -> str:
        asyncio.run(write(url))
        return url

    @pytest.fixture
    async def store(self, written: str) -> AsyncIterator[Store]:
        s = await open_store(written)
        yield s
        await s.close()

    async def page(self, store: Store, days: int, base: str = "/") -> str:
        got = await render(store, AGENT["id"], TARGET["id"], days, base, NOW)
        assert got is not None
        title, fragment = got
        assert AGENT["id"] in title and TARGET["id"] in title
        return fragment

    @pytest.mark.parametrize(("days", "hours"), [(7, 1), (30, 2), (90, 6)])
    async def test_median_and_band_are_the_merged_sketches_of_each_bucket(self, store: Store, days: int,
                                                                         hours: int) -> None:
        fragment = await self.page(store, days)
        chart = Chart(fragment)
        want = await expected_buckets(store, days, hours)
        with_rtt = {k: v for k, v in want.items() if v[0].rtt_count}
        medians = chart.medians()
        assert len(medians) == len(with_rtt)
        tops = [r.quantile(0.95) or 0.0 for r, _ in with_rtt.values()]
        assert chart.y_top >= max(tops) and re.search(rf">{chart.y_top:g}</text>", chart.body)
        for start, end, y, colour in medians:
            key = bucket_key(start, hours)
            assert (end - start) == hours * HOUR and bucket_key(end - HOUR, hours) == key
            merged, ks = with_rtt[key]
            assert close(y, chart.y(merged.quantile(0.5) or 0.0)), (start, y)
            sent = 2 * ECHOES * len(ks)
            lost = sum(lost_in(k) for k in ks)
            assert colour == colour_for(100.0 * lost / sent), (start, ks)
        # the band and the smoke: per bucket, step tops and bottoms at the merged quantiles
        for q, (lo, hi) in (("0.05-0.95", (0.05, 0.95)), ("0.25-0.75", (0.25, 0.75))):
            polygons = chart.layers(q)
            assert len(polygons) == len(runs(sorted(with_rtt)))
            for points in polygons:
                n = len(points) // 4
                upper, lower = points[:2 * n], points[2 * n:][::-1]
                for j in range(n):
                    key = bucket_key(chart.at(upper[2 * j][0]), hours)
                    merged = with_rtt[key][0]
                    assert close(upper[2 * j][1], chart.y(merged.quantile(hi) or 0.0))
                    assert close(lower[2 * j][1], chart.y(merged.quantile(lo) or 0.0))

    async def test_gaps_and_loss_colours_by_hour(self, store: Store) -> None:
        chart = Chart(await self.page(store, 7))
        steps = {start: colour for start, _, _, colour in chart.medians()}
        for k in range(48):
            at = hour_ago(k)
            if k in GAP or k == ALL_LOST:
                assert at not in steps, k
            else:
                assert steps[at] == colour_for(100.0 * lost_in(k) / (2 * ECHOES)), k
        assert {colour_for(2.5), colour_for(10.0), colour_for(0.0)} <= set(steps.values())
        assert chart.lost_marks() == [(hour_ago(ALL_LOST), hour_ago(ALL_LOST) + HOUR)]
        # the gap and the lost hour split the band into three runs (plus nothing before 48 h ago)
        assert len(chart.layers("0.05-0.95")) == 3
        assert len(runs(sorted(bucket_key(s, 1) for s in steps))) == 3

    async def test_one_day_shows_the_last_24_hours_with_times_on_the_agents_clock(self, store: Store) -> None:
        fragment = await self.page(store, 1, base="/dash/")
        chart = Chart(fragment)
        assert (chart.t0, chart.t1) == ((END - timedelta(days=1)).timestamp(), END.timestamp())
        assert {s for s, *_ in chart.medians()} == {hour_ago(k) for k in range(24) if k not in GAP}
        # axis ticks every 3 local hours: 21:00 Shanghai is 13:00 UTC
        assert ">21:00</text>" in chart.body and ">Fri 11-20</text>" in chart.body
        for d in (1, 7, 30, 90):
            link = f'href="/dash/target/{AGENT["id"]}/{TARGET["id"]}?days={d}"'
            assert (link in fragment) == (d != 1), d

    @pytest.mark.parametrize("days", [1, 7])
    async def test_tcp_and_sse_figures_are_the_stores_merges_over_local_days(self, store: Store,
                                                                              days: int) -> None:
        fragment = await self.page(store, days)
        assert f"TCP and SSE, the last {days} local day" in fragment
        # the last N local days: from local midnight N − 1 days before today (Shanghai) up to now
        start = (NOW + timedelta(hours=8)).replace(hour=0, minute=0) - timedelta(days=days - 1, hours=8)
        for probe, names in (("tcp", ("connect P50, ms", "connect P95, ms", "failed connects, %")),
                             ("sse", ("first event P50, ms", "first event P95, ms", "stalls per minute"))):
            got = table(fragment, probe)
            whole = await store.window_stats(AGENT["id"], TARGET["id"], probe, start, NOW)
            peak = await store.window_stats(AGENT["id"], TARGET["id"], probe, start, NOW,
                                            hours=lambda h: 20 <= (h + timedelta(hours=8)).hour < 23)
            assert whole is not None and peak is not None
            for name, figure, fmt in zip(names, ("rtt_p50_ms", "rtt_p95_ms",
                                                 "loss_pct" if probe == "tcp" else "stalls_per_min"),
                                         ("{:.1f}", "{:.1f}", "{:.2f}"), strict=True):
                assert got[name] == (fmt.format(getattr(whole, figure)), fmt.format(getattr(peak, figure)))
            assert got["rounds (failed)" if probe == "tcp" else "streams (failed)"][0] == \
                f"{whole.rounds} ({whole.error_rounds})"

    async def test_path_history_per_direction_with_hop_diffs_and_lines(self, store: Store) -> None:
        fragment = await self.page(store, 7)
        forward = history(fragment, "forward")
        # newest first: back to cn2-gia (6 h ago), then the change to 163 and its line mismatch (26 h ago)
        assert len(forward) == 3
        local = (hour_ago(6) + timedelta(minutes=30, hours=8)).strftime("%Y-%m-%d %H:%M")
        assert forward[0].startswith(f"{local} CST") and "163 → cn2-gia" in forward[0]
        assert "+3 / −2 hops: 2 hops same · 3: 202.97.12.1 → ??? · 4: 202.97.50.1 → 59.43.1.1 · "\
               "+5 59.43.246.2 · 1 hop same" in forward[0]
        assert "cn2-gia → 163" in forward[2]
        assert "+2 / −3 hops: 2 hops same · 3: ??? → 202.97.12.1 · 4: 59.43.1.1 → 202.97.50.1 · "\
               "−5 59.43.246.2 · 1 hop same" in forward[2]
        assert "detected 163, sold as cn2-gia" in forward[1]
        back = history(fragment, "return")
        # the way back: the first trace was not the line sold (a mismatch), then one hop changed
        assert len(back) == 2 and "cn2-gt → cn2-gt" in back[0]
        assert "detected cn2-gt, sold as cn2-gia" in back[1]
        assert "+1 / −1 hops: 1 hop same · 2: 100.64.0.1 → 100.64.0.9 · 3 hops same" in back[0]
        # a day back: only what happened in it
        day = await self.page(store, 1)
        assert len(history(day, "forward")) == 1 and len(history(day, "return")) == 1

    async def test_without_icmp_the_mtr_destination_without_rtt_an_empty_chart(self, store: Store) -> None:
        traced = [mtr_envelope(hour_ago(k), CN2, target="mtr-only") for k in (2, 3, 5)]
        back = [mtr_envelope(hour_ago(k), GT, target="rmtr-only", probe="rmtr") for k in (2, 3)]
        await store.write(typed([*traced, *back]))
        got = await render(store, AGENT["id"], "mtr-only", 1, "/", NOW)
        assert got is not None and "mtr RTT, ms" in got[1]
        assert {s for s, *_ in Chart(got[1]).medians()} == {hour_ago(k) for k in (2, 3, 5)}
        got = await render(store, AGENT["id"], "rmtr-only", 1, "/", NOW)
        assert got is not None and "no RTT measurements in this span" in got[1]
        assert Chart(got[1]).medians() == [] and "TCP connect: not measured in these days" in got[1]

    async def test_unknown_pairs_are_none(self, store: Store) -> None:
        for agent, target in (("nobody", TARGET["id"]), (AGENT["id"], "nothing"), ("nobody", "nothing")):
            assert await render(store, agent, target, 7, "/", NOW) is None
        # agent and target both on record, but this agent never measured that target
        await store.write(typed([icmp_envelope(NOW - HOUR, [10.0], agent="bj-cu-1", target="tyo-1")]))
        assert await render(store, "bj-cu-1", TARGET["id"], 7, "/", NOW) is None
        assert await render(store, AGENT["id"], "tyo-1", 7, "/", NOW) is None
        assert await render(store, "bj-cu-1", "tyo-1", 7, "/", NOW) is not None


def runs(keys: Iterable[int]) -> list[list[int]]:
    out: list[list[int]] = []
    for k in keys:
        if out and out[-1][-1] == k - 1:
            out[-1].append(k)
        else:
            out.append([k])
    return out
