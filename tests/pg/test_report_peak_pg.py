"""The peak report on the real PostgreSQL server: the same envelopes give the same report as SQLite
(sketches merge the same way on both), and the figures still match NumPy."""

from __future__ import annotations

from pathlib import Path

import pytest

from netprobe.report.peak import compute
from netprobe.store import open_store
from tests.support.pg import scratch_database
from tests.support.report import (
    MTR_ONLY,
    NOW,
    _close,
    assert_quantile,
    dataset,
    expected,
    selected,
    write_all,
)

pytestmark = pytest.mark.postgres


async def test_peak_report_on_postgres_matches_sqlite_and_numpy(tmp_path: Path) -> None:
    envs = dataset(days=8, seed=3)
    sqlite_url = f"sqlite:///{tmp_path / 'same.db'}"
    await write_all(sqlite_url, envs)
    with scratch_database() as pg_url:
        await write_all(pg_url, envs)
        pg = await open_store(pg_url)
        try:
            assert pg.dialect == "postgresql"
            on_pg = await compute(pg, days=7, window="22-2", offpeak="3-6", now=NOW)
        finally:
            await pg.close()
    lite = await open_store(sqlite_url)
    try:
        on_sqlite = await compute(lite, days=7, window="22-2", offpeak="3-6", now=NOW)
    finally:
        await lite.close()
    assert len(on_pg.rows) == 10
    _close(on_pg.to_dict(), on_sqlite.to_dict())
    row = next(r for r in on_pg.rows if r.agent == "fra-dt-1" and r.target == "us-163")
    night = expected(selected(envs, "fra-dt-1", "us-163", "icmp", (22, 23, 0, 1)))
    assert row.peak.rounds == night.rounds
    assert_quantile(row.peak.rtt_p95_ms, night.samples, 95)
    tyo = next(r for r in on_pg.rows if r.agent == "sh-ct-1" and r.target == MTR_ONLY)
    assert tyo.detected_line == "cn2-gt" and tyo.rtt_probe == "mtr"
    assert tyo.offpeak.rounds == expected(selected(envs, "sh-ct-1", MTR_ONLY, "mtr", range(3, 6))).rounds
