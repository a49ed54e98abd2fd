"""The dashboard's target page on real stores, SQLite and PostgreSQL (tests/support/pg.py BOTH): the SVG's
medians, band and smoke against the store's DDSketch merges per bucket, loss colours and gaps, the
TCP/SSE figures against the merged hour rows (window_stats), path history per direction, unknown pairs."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta

import pytest

from netprobe.dashboard.target import target_page as render
from netprobe.store import Store, open_store
from tests.support.path_events import CN2, GT, mtr_envelope
from tests.support.pg import BOTH, database_url
from tests.support.store import AGENT, TARGET, icmp_envelope, typed, window_stats
from tests.support.target_page import (
    ALL_LOST,
    ECHOES,
    END,
    GAP,
    HOUR,
    NOW,
    Chart,
    bucket_key,
    close,
    colour_for,
    expected_buckets,
    history,
    hour_ago,
    lost_in,
    runs,
    table,
    write,
)


@pytest.fixture(scope="module", params=BOTH)
def written(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The dataset, written once per database: the tests read it (one adds another pair)."""
    with database_url(request.param, tmp_path_factory.mktemp("target")) as url:
        asyncio.run(write(url))
        yield url


@pytest.fixture
async def store(written: str) -> AsyncIterator[Store]:
    s = await open_store(written)
    yield s
    await s.close()


async def page(store: Store, days: int, base: str = "/") -> str:
    got = await render(store, AGENT["id"], TARGET["id"], days, base, NOW)
    assert got is not None
    title, fragment = got
    assert AGENT["id"] in title and TARGET["id"] in title
    return fragment


@pytest.mark.parametrize(("days", "hours"), [(7, 1), (30, 2), (90, 6)])
async def test_median_and_band_are_the_merged_sketches_of_each_bucket(store: Store, days: int,
                                                                     hours: int) -> None:
    fragment = await page(store, days)
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


async def test_gaps_and_loss_colours_by_hour(store: Store) -> None:
    chart = Chart(await page(store, 7))
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


async def test_one_day_shows_the_last_24_hours_with_times_on_the_agents_clock(store: Store) -> None:
    fragment = await page(store, 1, base="/dash/")
    chart = Chart(fragment)
    assert (chart.t0, chart.t1) == ((END - timedelta(days=1)).timestamp(), END.timestamp())
    assert {s for s, *_ in chart.medians()} == {hour_ago(k) for k in range(24) if k not in GAP}
    # axis ticks every 3 local hours: 21:00 Shanghai is 13:00 UTC
    assert ">21:00</text>" in chart.body and ">Fri 11-20</text>" in chart.body
    for d in (1, 7, 30, 90):
        link = f'href="/dash/target/{AGENT["id"]}/{TARGET["id"]}?days={d}"'
        assert (link in fragment) == (d != 1), d


@pytest.mark.parametrize("days", [1, 7])
async def test_tcp_and_sse_figures_are_the_stores_merges_over_local_days(store: Store,
                                                                          days: int) -> None:
    fragment = await page(store, days)
    assert f"TCP and SSE, the last {days} local day" in fragment
    # the last N local days: from local midnight N − 1 days before today (Shanghai) up to now
    start = (NOW + timedelta(hours=8)).replace(hour=0, minute=0) - timedelta(days=days - 1, hours=8)
    for probe, names in (("tcp", ("connect P50, ms", "connect P95, ms", "failed connects, %")),
                         ("sse", ("first event P50, ms", "first event P95, ms", "stalls per minute"))):
        got = table(fragment, probe)
        whole = await window_stats(store, AGENT["id"], TARGET["id"], probe, start, NOW)
        peak = await window_stats(store, AGENT["id"], TARGET["id"], probe, start, NOW,
                                  hours=lambda h: 20 <= (h + timedelta(hours=8)).hour < 23)
        assert whole is not None and peak is not None
        for name, figure, fmt in zip(names, ("rtt_p50_ms", "rtt_p95_ms",
                                             "loss_pct" if probe == "tcp" else "stalls_per_min"),
                                     ("{:.1f}", "{:.1f}", "{:.2f}"), strict=True):
            assert got[name] == (fmt.format(getattr(whole, figure)), fmt.format(getattr(peak, figure)))
        assert got["rounds (failed)" if probe == "tcp" else "streams (failed)"][0] == \
            f"{whole.rounds} ({whole.error_rounds})"


async def test_path_history_per_direction_with_hop_diffs_and_lines(store: Store) -> None:
    fragment = await page(store, 7)
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
    day = await page(store, 1)
    assert len(history(day, "forward")) == 1 and len(history(day, "return")) == 1


async def test_without_icmp_the_mtr_destination_without_rtt_an_empty_chart(store: Store) -> None:
    traced = [mtr_envelope(hour_ago(k), CN2, target="mtr-only") for k in (2, 3, 5)]
    back = [mtr_envelope(hour_ago(k), GT, target="rmtr-only", probe="rmtr") for k in (2, 3)]
    await store.write(typed([*traced, *back]))
    got = await render(store, AGENT["id"], "mtr-only", 1, "/", NOW)
    assert got is not None and "mtr RTT, ms" in got[1]
    assert {s for s, *_ in Chart(got[1]).medians()} == {hour_ago(k) for k in (2, 3, 5)}
    got = await render(store, AGENT["id"], "rmtr-only", 1, "/", NOW)
    assert got is not None and "no RTT measurements in this span" in got[1]
    assert Chart(got[1]).medians() == [] and "TCP connect: not measured in these days" in got[1]


async def test_unknown_pairs_are_none(store: Store) -> None:
    for agent, target in (("nobody", TARGET["id"]), (AGENT["id"], "nothing"), ("nobody", "nothing")):
        assert await render(store, agent, target, 7, "/", NOW) is None
    # agent and target both on record, but this agent never measured that target
    await store.write(typed([icmp_envelope(NOW - HOUR, [10.0], agent="bj-cu-1", target="tyo-1")]))
    assert await render(store, "bj-cu-1", TARGET["id"], 7, "/", NOW) is None
    assert await render(store, AGENT["id"], "tyo-1", 7, "/", NOW) is None
    assert await render(store, "bj-cu-1", "tyo-1", 7, "/", NOW) is not None
