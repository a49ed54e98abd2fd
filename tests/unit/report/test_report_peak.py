"""`netprobe report peak` on a generated dataset with a known evening peak: figures against NumPy over
the same samples, windows in each agent's zone (midnight, DST), worst hour, ranking, formats, CLI."""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from netprobe.report.peak import PeakReport, compute, peak_rows
from netprobe.report.ranking import LOSS_PENALTY_MS_PER_PCT
from netprobe.report.render_md import markdown
from netprobe.report.render_table import print_table
from netprobe.report.rows import PeakRow
from netprobe.store import Store, open_store
from netprobe.textout import Out
from tests.support.report import (
    AGENTS,
    ICMP_TARGETS,
    MTR_ONLY,
    NOW,
    OFFPEAK,
    PEAK,
    WORST,
    assert_quantile,
    dataset,
    expected,
    merged_rollup,
    selected,
    started,
    write_all,
)
from tests.support.store import count_results

# Derived figures (a ratio of two quantiles) get twice the sketch's 1 %.
REL = 0.011


@pytest.fixture(scope="module")
def envs() -> list[dict[str, Any]]:
    return dataset()


@pytest.fixture(scope="module")
def db_url(tmp_path_factory: pytest.TempPathFactory, envs: list[dict[str, Any]]) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('peak') / 'peak.db'}"
    asyncio.run(write_all(url, envs))
    return url


@pytest.fixture
async def store(db_url: str) -> Any:
    s = await open_store(db_url)
    yield s
    await s.close()


def _row(rows: list[PeakRow], agent: str, target: str) -> PeakRow:
    return next(r for r in rows if r.agent == agent and r.target == target)


def _check_window(fig: Any, envs: list[dict[str, Any]]) -> None:
    exp = expected(envs)
    assert fig.rounds == exp.rounds and fig.samples == exp.samples.size
    for q, got in ((50, fig.rtt_p50_ms), (95, fig.rtt_p95_ms), (99, fig.rtt_p99_ms)):
        assert_quantile(got, exp.samples, q)
    assert fig.loss_pct == pytest.approx(exp.loss_pct, rel=1e-12)
    assert fig.jitter_ms == pytest.approx(exp.jitter_ms, rel=1e-12)


async def test_peak_and_offpeak_match_numpy_in_each_agents_zone(store: Store,
                                                                envs: list[dict[str, Any]]) -> None:
    rows = await peak_rows(store, days=7, window="20-23", offpeak="3-6", now=NOW)
    assert {(r.agent, r.target) for r in rows} == {(a, t) for a in AGENTS for t in (*ICMP_TARGETS, MTR_ONLY)}
    for agent in AGENTS:
        for target in ICMP_TARGETS:
            row = _row(rows, agent, target)
            assert row.rtt_probe == "icmp" and row.timezone == AGENTS[agent]["timezone"]
            peak = selected(envs, agent, target, "icmp", PEAK)
            off = selected(envs, agent, target, "icmp", OFFPEAK)
            # now is 18:00 in Shanghai and 12:00 in Berlin: six evenings so far, seven early mornings
            assert (len(peak), len(off)) == (6 * 3 * 3, 7 * 3 * 3)
            _check_window(row.peak, peak)
            _check_window(row.offpeak, off)
            exp_peak, exp_off = expected(peak), expected(off)
            assert row.peak.rtt_p95_ms is not None and row.offpeak.rtt_p95_ms is not None
            assert row.peak.rtt_p95_ms > row.offpeak.rtt_p95_ms       # the generated evening peak shows
            d = row.degradation
            assert d.rtt_p95_delta_ms == pytest.approx(row.peak.rtt_p95_ms - row.offpeak.rtt_p95_ms)
            assert d.rtt_p95_ratio == pytest.approx(exp_peak.p(95) / exp_off.p(95), rel=2 * REL)
            assert d.loss_delta_pct == pytest.approx(exp_peak.loss_pct - exp_off.loss_pct)  # type: ignore[operator]


async def test_the_zone_decides_which_utc_hours_are_peak(store: Store, envs: list[dict[str, Any]]) -> None:
    """Shanghai's 20:00 is 12:00Z; Berlin's was 19:00Z before 29 March and 18:00Z after. The 24-hour
    profile merges each local hour of day over the days."""
    rows = await peak_rows(store, days=7, now=NOW)
    sh, fra = _row(rows, "sh-ct-1", "hk-cn2"), _row(rows, "fra-dt-1", "hk-cn2")
    assert sh.worst_hour is not None and sh.worst_hour.hour.utcoffset() == timedelta(hours=8)
    assert fra.worst_hour is not None and 20 <= fra.worst_hour.hour.hour < 23
    for row in (sh, fra):
        assert [p.hour for p in row.profile] == list(range(24))
        for hour in (0, 3, 12, 20, 22):
            exp = expected(selected(envs, row.agent, row.target, "icmp", [hour]))
            prof = row.profile[hour]
            assert prof.rounds == exp.rounds
            assert_quantile(prof.rtt_p50_ms, exp.samples, 50)
            assert_quantile(prof.rtt_p5_ms, exp.samples, 5)
            assert prof.loss_pct == pytest.approx(exp.loss_pct)
    assert {started(e).hour for e in selected(envs, "fra-dt-1", "hk-cn2", "icmp", [20])} == {18, 19}


async def test_window_across_midnight(store: Store, envs: list[dict[str, Any]]) -> None:
    rows = await peak_rows(store, days=7, window="22-2", offpeak="10-14", now=NOW)
    for agent in AGENTS:
        row = _row(rows, agent, "us-163")
        night = selected(envs, agent, "us-163", "icmp", (22, 23, 0, 1))
        _check_window(row.peak, night)
        _check_window(row.offpeak, selected(envs, agent, "us-163", "icmp", range(10, 14)))
    # the first local day's small hours count (the days are calendar days, not window occurrences)
    assert _row(rows, "sh-ct-1", "us-163").peak.rounds == 7 * 2 * 3 + 6 * 2 * 3


async def test_dst_transition_day(store: Store, envs: list[dict[str, Any]]) -> None:
    """29 March 2026 in Berlin has no 02:00: window 1-4 holds two hours that day, 20-23 still three."""
    now = datetime(2026, 3, 29, 21, 59, tzinfo=UTC)                 # 23:59 CEST
    rows = await peak_rows(store, days=1, window="20-23", offpeak="1-4", now=now)
    fra = _row(rows, "fra-dt-1", "hk-bgp")
    off = selected(envs, "fra-dt-1", "hk-bgp", "icmp", (1, 2, 3), days=1, now=now)
    assert {started(e).hour for e in off} == {0, 1}                   # 01:00 CET, 03:00 CEST
    assert fra.offpeak.rounds == 2 * 3
    _check_window(fra.offpeak, off)
    peak = selected(envs, "fra-dt-1", "hk-bgp", "icmp", PEAK, days=1, now=now)
    assert {started(e).hour for e in peak} == {18, 19, 20}            # CEST: UTC+2
    _check_window(fra.peak, peak)
    sh = _row(rows, "sh-ct-1", "hk-bgp")                              # no DST: 30 March already there
    assert sh.offpeak.rounds == 3 * 3 and sh.peak.rounds == 0 and sh.peak.rtt_p95_ms is None


async def test_fall_back_day_counts_the_repeated_hour(tmp_path: Path) -> None:
    now = datetime(2026, 10, 25, 22, 59, tzinfo=UTC)                 # 23:59 CET, 25 October
    envs = dataset(now=now, days=2, agents=["fra-dt-1"], targets=["hk-cn2"], extras=False)
    url = f"sqlite:///{tmp_path / 'autumn.db'}"
    await write_all(url, envs)
    store = await open_store(url)
    try:
        rows = await peak_rows(store, days=1, window="2-3", offpeak="1-4", now=now)
    finally:
        await store.close()
    (row,) = rows
    assert row.peak.rounds == 2 * 3                                   # 02:00 CEST and 02:00 CET
    assert row.offpeak.rounds == 4 * 3
    _check_window(row.offpeak, selected(envs, "fra-dt-1", "hk-cn2", "icmp", (1, 2, 3), days=1, now=now))


async def test_worst_hour(store: Store, envs: list[dict[str, Any]]) -> None:
    rows = await peak_rows(store, days=7, now=NOW)
    agent, target, hour = WORST
    row = _row(rows, agent, target)
    assert row.worst_hour is not None
    assert row.worst_hour.hour.isoformat() == "2026-03-27T21:00:00+08:00"
    that_hour = [e for e in envs if e["agent"]["id"] == agent and e["target"]["id"] == target
                 and e["probe"] == "icmp" and started(e).replace(minute=0) == hour]
    assert row.worst_hour.loss_pct == pytest.approx(expected(that_hour).loss_pct)
    assert row.worst_hour.loss_pct > 10
    # a window that leaves that hour out no longer finds it
    later = await peak_rows(store, days=7, window="22-23", now=NOW)
    assert _row(later, agent, target).worst_hour.hour.hour == 22  # type: ignore[union-attr]


async def test_mtr_fallback_tcp_sse_and_detected_line(store: Store, envs: list[dict[str, Any]]) -> None:
    rows = await peak_rows(store, days=7, now=NOW)
    tyo = _row(rows, "sh-ct-1", MTR_ONLY)
    assert tyo.rtt_probe == "mtr" and tyo.line == "cn2-gia" and tyo.detected_line == "cn2-gt"
    assert tyo.line_mismatch
    _check_window(tyo.peak, selected(envs, "sh-ct-1", MTR_ONLY, "mtr", PEAK))
    us = _row(rows, "sh-ct-1", "us-163")
    assert us.rtt_probe == "icmp" and us.detected_line == "163" and not us.line_mismatch
    assert _row(rows, "fra-dt-1", "us-163").detected_line is None     # no mtr from that agent
    hk = _row(rows, "sh-ct-1", "hk-cn2")
    assert hk.detected_line is None and hk.datacenter == "hk"
    tcp = expected(selected(envs, "sh-ct-1", "hk-cn2", "tcp", PEAK))
    assert_quantile(hk.peak.figure("tcp_connect_p95_ms"), tcp.samples, 95)
    sse = selected(envs, "sh-ct-1", "hk-cn2", "sse", PEAK)
    firsts = np.array([e["result"]["first_event_ms"] for e in sse])
    assert_quantile(hk.peak.figure("sse_first_event_p95_ms"), firsts, 95)
    assert hk.peak.figure("stalls_per_min") == pytest.approx(2 / 0.5)  # 2 stalls per 30 s stream at peak
    assert hk.offpeak.figure("stalls_per_min") == 0.0
    assert hk.peak.figure("sse_delay_var_p95_ms") == pytest.approx(5.0)
    assert _row(rows, "sh-ct-1", "hk-bgp").peak.figure("tcp_connect_p95_ms") is None


async def test_peak_only_gives_the_same_peak_figures(store: Store) -> None:
    """What the budget reads (peak_only: window hours alone) is the full report's peak, row for row."""
    for window in ("20-23", "22-2"):
        full = await peak_rows(store, days=7, window=window, now=NOW)
        lean = await peak_rows(store, days=7, window=window, now=NOW, peak_only=True)
        assert [(r.agent, r.target, r.rank) for r in lean] == [(r.agent, r.target, r.rank) for r in full]
        for a, b in zip(full, lean, strict=True):
            assert b.peak.to_dict() == a.peak.to_dict() and b.worst_hour == a.worst_hour
            assert b.offpeak.rounds == 0 and b.profile == () and b.detected_line is None


async def test_ranking_per_region(store: Store) -> None:
    rows = await peak_rows(store, days=7, now=NOW)
    assert [r.region for r in rows] == sorted(r.region or "" for r in rows)   # grouped by region
    for region in ("cn-east", "eu-de"):
        mine = [r for r in rows if r.region == region]
        assert [r.rank for r in mine] == list(range(1, len(mine) + 1))        # ranks restart per region
        for r in mine:
            assert r.peak.rtt_p95_ms is not None and r.peak.loss_pct is not None
            assert r.score_ms == pytest.approx(r.peak.rtt_p95_ms + LOSS_PENALTY_MS_PER_PCT * r.peak.loss_pct)
        assert [r.score_ms for r in mine] == sorted(r.score_ms or 0.0 for r in mine)
    sh = {r.target: r for r in rows if r.agent == "sh-ct-1"}
    # hk-bgp's peak P95 is far below us-cn2's, but its 1.5 % peak loss ranks it behind
    assert sh["hk-bgp"].peak.rtt_p95_ms < sh["us-cn2"].peak.rtt_p95_ms  # type: ignore[operator]
    assert sh["hk-bgp"].rank > sh["us-cn2"].rank                          # type: ignore[operator]
    assert sh["us-163"].rank == 5                                         # the congested 163 line is last


async def test_filters(store: Store) -> None:
    only = await peak_rows(store, days=7, agent="fra-dt-1", now=NOW)
    assert {r.agent for r in only} == {"fra-dt-1"} and len(only) == 5
    region = await peak_rows(store, days=7, region="cn-east", now=NOW)
    assert {r.agent for r in region} == {"sh-ct-1"}
    assert await peak_rows(store, days=7, region="nowhere", now=NOW) == []


def _json(report: PeakReport) -> dict[str, Any]:
    return json.loads(json.dumps(report.to_dict()))      # what --format json prints


async def test_json_fields_as_design_pins_them(store: Store) -> None:
    doc = _json(await compute(store, days=7, now=NOW))
    assert {"rows", "window", "offpeak_window", "days", "generated_at"} <= set(doc)
    assert (doc["window"], doc["offpeak_window"], doc["days"]) == ("20-23", "3-6", 7)
    assert doc["generated_at"] == "2026-03-30T10:00:00Z"
    assert len(doc["rows"]) == 10
    for row in doc["rows"]:
        pinned = {"agent", "region", "target", "datacenter", "line", "peak", "offpeak", "worst_hour"}
        assert pinned <= set(row)
        assert {"detected_line", "tcp_connect_p95_ms", "sse_first_event_p95_ms", "stalls_per_min",
                "degradation", "rank"} <= set(row)
        for block in ("peak", "offpeak"):
            figures = {"rtt_p50_ms", "rtt_p95_ms", "rtt_p99_ms", "jitter_ms", "loss_pct", "rounds"}
            assert figures <= set(row[block])
        assert set(row["worst_hour"]) == {"hour", "loss_pct"}
        assert datetime.fromisoformat(row["worst_hour"]["hour"]).utcoffset() is not None
        assert len(row["profile"]) == 24
    first = doc["rows"][0]
    assert (first["region"], first["rank"], first["agent"]) == ("cn-east", 1, "sh-ct-1")


async def test_markdown_and_table(store: Store) -> None:
    report = await compute(store, days=7, now=NOW)
    md = markdown(report).splitlines()
    table = [ln for ln in md if ln.startswith("|")]
    assert table[0].startswith("| region | rank | agent | target | dc | line | detected | peak p50 |")
    assert table[1].startswith("|---|---:|---|---|")
    assert "| tcp p95 | sse 1st p95 | stalls/min | rounds pk/off |" in table[0]   # no owd ran: no owd columns
    assert len(table) == 2 + 10
    assert "| cn-east | 1 | sh-ct-1 | tyo-cn2 | tyo | cn2-gia | cn2-gt ≠ |" in md[4]
    assert "Evening peak 20:00–23:00 vs off-peak 03:00–06:00" in md[0]

    buf = io.StringIO()
    print_table(report, Out(file=buf, width=260, color=False))
    text = buf.getvalue()
    assert "Evening peak 20:00–23:00" in text and "worst hour (local)" in text
    for target in (*ICMP_TARGETS, MTR_ONLY):
        assert target in text
    assert "03-27 21:00" in text                                         # sh-ct-1's worst hour


async def test_empty_database(tmp_path: Path) -> None:
    store = await open_store(f"sqlite:///{tmp_path / 'empty.db'}")
    try:
        report = await compute(store, days=7, now=NOW)
    finally:
        await store.close()
    assert report.rows == [] and _json(report)["rows"] == []
    buf = io.StringIO()
    print_table(report, Out(file=buf, width=200, color=False))
    assert "no hourly rollups in the last 7 local days" in buf.getvalue()
    assert "nothing to report" in markdown(report)


async def test_works_from_rollups_after_raw_retention(tmp_path: Path) -> None:
    envs = dataset(days=8, agents=["sh-ct-1"], seed=5)
    url = f"sqlite:///{tmp_path / 'retained.db'}"
    await write_all(url, envs)
    store = await open_store(url)
    try:
        before = await compute(store, days=7, now=NOW)
        deleted = await store.enforce_retention(raw_days=1, now=NOW + timedelta(days=30))
        assert deleted == len(envs) and await count_results(store) == 0
        after = await compute(store, days=7, now=NOW)
    finally:
        await store.close()
    b, a = _json(before), _json(after)
    for rb, ra in zip(b["rows"], a["rows"], strict=True):
        if rb["target"] == "us-163":      # its label only lived in the raw traces (never an event)
            assert (rb["detected_line"], ra["detected_line"]) == ("163", None)
            assert (rb["line_fwd"], ra["line_fwd"]) == ("163", None)        # the same forward line
            rb["detected_line"] = rb["line_fwd"] = None
        assert ra == rb
    tyo = next(r for r in a["rows"] if r["target"] == MTR_ONLY)
    assert tyo["detected_line"] == "cn2-gt"                              # from the line_mismatch event


# -- the command --------------------------------------------------------------------------------------
def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "250"}
    return subprocess.run([sys.executable, "-m", "netprobe.cli", "report", "peak", *args],
                          capture_output=True, text=True, timeout=120, env=env)


@pytest.fixture(scope="module")
def live_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, datetime]]:
    """Three days up to the real now (the command has no --now), Shanghai only (fixed offset)."""
    now = datetime.now(UTC)
    envs = dataset(now=now, days=3, agents=["sh-ct-1"], targets=["hk-cn2", "us-163"], extras=False)
    url = f"sqlite:///{tmp_path_factory.mktemp('cli') / 'cli.db'}"
    asyncio.run(write_all(url, envs))
    yield url, now


def test_cli_json(live_db: tuple[str, datetime]) -> None:
    url, _ = live_db
    done = _cli("--db", url, "--format", "json", "--days", "2")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["days"] == 2 and doc["window"] == "20-23"
    assert [(r["target"], r["rank"]) for r in doc["rows"]] == [("hk-cn2", 1), ("us-163", 2)]
    assert all(r["peak"]["rounds"] > 0 or r["offpeak"]["rounds"] > 0 for r in doc["rows"])
    assert doc["rows"][0]["line"] == "cn2-gia" and doc["rows"][0]["datacenter"] == "hk"


def test_cli_formats_out_and_errors(live_db: tuple[str, datetime], tmp_path: Path) -> None:
    url, _ = live_db
    md = _cli("--db", url, "--format", "md", "--window", "22-2", "--region", "cn-east")
    assert md.returncode == 0, md.stderr
    assert "| region | rank |" in md.stdout and "22:00–02:00" in md.stdout
    table = _cli("--db", url)
    assert table.returncode == 0 and "hk-cn2" in table.stdout and "peak p95" in table.stdout
    out = tmp_path / "r.html"
    html = _cli("--db", url, "--format", "html", "--out", str(out))
    assert html.returncode == 0 and out.read_text().startswith("<!DOCTYPE html>")
    assert "Both directions" not in out.read_text()            # no owd rounds: no per-direction chart
    bad = _cli("--db", url, "--window", "20-20")
    assert bad.returncode == 2 and "--window" in bad.stderr and "Traceback" not in bad.stderr
    slo = _cli("--db", url, "--slo-ttft-ms", "0")
    assert slo.returncode == 2 and "--slo-ttft-ms" in slo.stderr
    typed = _cli("--db", url, "--days", "x")            # click's message
    assert typed.returncode == 2 and "valid integer" in " ".join(typed.stderr.split())
    assert _cli("--db", url, "--format", "xml").returncode == 2
    assert _cli("--db", url, "--days", "0").returncode == 2


def test_cli_empty_database(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'none.db'}"
    done = _cli("--db", url, "--format", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["rows"] == []
    text = _cli("--db", url)
    assert text.returncode == 0 and "nothing to report" in text.stdout


async def test_line_comparison_is_the_merged_rollups(store: Store) -> None:
    """compare_lines sums the rows' bins (no sketch built): the figures of merging their Rollups."""
    from netprobe.report.line_comparison import compare_lines, line_of
    from netprobe.store.rollups import Rollup

    rows = await peak_rows(store, days=7, now=NOW)
    got = compare_lines(rows)
    assert got
    for g in got:
        key = (g.region, g.datacenter, g.line)
        members = [r for r in rows if (r.region, r.datacenter, line_of(r)) == key]
        for window, p95, loss in (("peak", g.peak_p95_ms, g.peak_loss_pct),
                                  ("offpeak", g.offpeak_p95_ms, g.offpeak_loss_pct)):
            total = Rollup()
            for r in members:
                rollup = merged_rollup(getattr(r, window))
                if rollup is not None:
                    total.merge(rollup)
            want = total.figures()
            assert p95 == want["rtt_p95_ms"] and loss == want["loss_pct"]
        peak = Rollup()
        for r in members:
            if (rollup := merged_rollup(r.peak)) is not None:
                peak.merge(rollup)
        assert g.peak_p50_ms == peak.figures()["rtt_p50_ms"]
