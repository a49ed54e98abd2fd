"""The report read through the prefix rollups equals the report read from the hourly rows alone, on the
same data: every window and range, across DST, after a late write into folded hours, and after the
fold catches up again (SQLite and the real PostgreSQL)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from netprobe.report.peak import compute
from netprobe.store import open_store
from netprobe.store.schema import rollups_prefix
from tests.support.pg import scratch_database
from tests.support.report import MTR_ONLY, NOW, _close, dataset, icmp, write_all
from tests.support.store import connection, typed


async def _report(url: str, **kw: Any) -> dict[str, Any]:
    store = await open_store(url)
    try:
        return (await compute(store, now=NOW, **kw)).to_dict()
    finally:
        await store.close()


async def _prefix_rows(url: str) -> int:
    from sqlalchemy import func, select

    async with connection(url) as conn:
        return int((await conn.execute(select(func.count()).select_from(rollups_prefix))).scalar_one())


CASES = [dict(days=1), dict(days=3), dict(days=7), dict(days=12), dict(days=30),
         dict(days=7, window="22-2", offpeak="9-17"), dict(days=5, agent="fra-dt-1")]


async def _same_both_ways(hourly: str, folded: str) -> None:
    for kw in CASES:
        a, b = await _report(hourly, **kw), await _report(folded, **kw)
        assert a["rows"], kw
        _close(a, b, str(kw))


async def test_prefix_and_hourly_reports_are_the_same(tmp_path: Path) -> None:
    envs = dataset(days=12, seed=5)          # Berlin's spring DST change is inside these days
    hourly, folded = f"sqlite:///{tmp_path / 'h.db'}", f"sqlite:///{tmp_path / 'f.db'}"
    await write_all(hourly, envs, fold=False)
    await write_all(folded, envs)
    assert await _prefix_rows(hourly) == 0
    # one row per series and local day (and a few series × days more for the agents' two zones)
    assert await _prefix_rows(folded) >= 10 * 12
    await _same_both_ways(hourly, folded)


async def test_a_late_write_into_folded_hours_is_seen_at_once_and_folded_again(tmp_path: Path) -> None:
    envs = dataset(days=10, seed=6)
    hourly, folded = f"sqlite:///{tmp_path / 'h.db'}", f"sqlite:///{tmp_path / 'f.db'}"
    await write_all(hourly, envs, fold=False)
    await write_all(folded, envs)
    before = await _prefix_rows(folded)
    # an agent's outbox delivers a round of 5 days ago (21:00 in Shanghai): every loss, a new worst hour
    late_at = (NOW - timedelta(days=5)).replace(hour=13, minute=30)
    late = icmp(late_at, "sh-ct-1", "hk-cn2", [None] * 100)
    for url in (hourly, folded):
        store = await open_store(url)
        try:
            assert (await store.write(typed([late]))).accepted == 1
        finally:
            await store.close()
    assert await _prefix_rows(folded) < before          # that series' rows from that hour on are gone
    await _same_both_ways(hourly, folded)
    report = await _report(folded, days=7)
    row = next(r for r in report["rows"] if r["agent"] == "sh-ct-1" and r["target"] == "hk-cn2")
    shanghai = ZoneInfo("Asia/Shanghai")
    assert row["worst_hour"]["hour"] == late_at.replace(minute=0).astimezone(shanghai).isoformat()
    store = await open_store(folded)
    try:
        stats = await store.fold_rollups()
    finally:
        await store.close()
    assert stats.series >= 1 and await _prefix_rows(folded) == before
    await _same_both_ways(hourly, folded)


async def test_series_newer_than_the_fold_are_read_from_their_hours(tmp_path: Path) -> None:
    """Folded a day before the data ends, then a series the fold never saw (icmp to the mtr-only
    target) starts: its hours and the other series' tails come from the hourly rows, with no refold
    marker; a late round of a new series before the fold (which leaves the marker) is read too."""
    envs = dataset(days=8, seed=9)
    hourly, folded = f"sqlite:///{tmp_path / 'h.db'}", f"sqlite:///{tmp_path / 'f.db'}"
    await write_all(hourly, envs, fold=False)
    await write_all(folded, envs, fold=False)
    store = await open_store(folded)
    try:
        await store.fold_rollups(now=NOW - timedelta(days=1))
    finally:
        await store.close()
    fresh = [icmp(NOW - timedelta(hours=h), "sh-ct-1", MTR_ONLY, [40.0 + h, None, 41.0])
             for h in range(2, 12)]
    late = [icmp(NOW - timedelta(days=3, hours=h), "fra-dt-1", MTR_ONLY, [90.0, 95.0 + h])
            for h in range(3)]
    for batch in (fresh, late):
        for url in (hourly, folded):
            store = await open_store(url)
            try:
                assert (await store.write(typed(batch))).accepted == len(batch)
            finally:
                await store.close()
        await _same_both_ways(hourly, folded)
        got = await _report(folded, days=7)
        assert any(r["agent"] == "sh-ct-1" and r["target"] == MTR_ONLY and r["rtt_probe"] == "icmp"
                   for r in got["rows"])


@pytest.mark.postgres
async def test_prefix_and_hourly_reports_are_the_same_on_postgres() -> None:
    envs = dataset(days=9, seed=7)
    with scratch_database() as hourly, scratch_database() as folded:
        await write_all(hourly, envs, fold=False)
        await write_all(folded, envs)
        await _same_both_ways(hourly, folded)


async def test_an_agent_that_changes_zone_is_read_in_its_new_zone_before_and_after_the_fold(
        tmp_path: Path) -> None:
    envs = dataset(days=6, seed=8)
    hourly, folded = f"sqlite:///{tmp_path / 'h.db'}", f"sqlite:///{tmp_path / 'f.db'}"
    await write_all(hourly, envs, fold=False)
    await write_all(folded, envs)
    moved = icmp(NOW - timedelta(minutes=30), "fra-dt-1", "hk-cn2", [30.0] * 20)
    moved["agent"] = {**moved["agent"], "timezone": "Asia/Tokyo"}     # the agent's row takes the new zone
    for url in (hourly, folded):
        store = await open_store(url)
        try:
            assert (await store.write(typed([moved]))).accepted == 1
        finally:
            await store.close()
    await _same_both_ways(hourly, folded)        # its rows are in the old zone: read from the hours
    store = await open_store(folded)
    try:
        await store.fold_rollups()               # rebuilt in Asia/Tokyo
    finally:
        await store.close()
    await _same_both_ways(hourly, folded)
    report = await _report(folded, days=3, agent="fra-dt-1")
    assert {r["timezone"] for r in report["rows"]} == {"Asia/Tokyo"}
