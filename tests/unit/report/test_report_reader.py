"""The report read over a Reader (netprobe.store.reads: plain SQL on psycopg or sqlite3, without
SQLAlchemy) is the report read over the Store (SQLAlchemy on psycopg), on the same data, on SQLite and
the real PostgreSQL; open_reader takes only databases at the head revision; the read path never imports
SQLAlchemy."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from netprobe.errors import StorageError
from netprobe.report.peak import compute
from netprobe.store import open_store
from netprobe.store.fleet import detected_lines
from netprobe.store.reads import Reader, Source, open_reader, prepare
from netprobe.store.source import open_source
from tests.support.pg import scratch_database
from tests.support.report import NOW, dataset, write_all

CASES: list[dict[str, Any]] = [dict(days=1), dict(days=7), dict(days=12), dict(days=30),
                               dict(days=7, window="22-2", offpeak="9-17"), dict(days=5, agent="fra-dt-1"),
                               dict(days=7, peak_only=True)]


async def _report(source: Source, **kw: Any) -> dict[str, Any]:
    return (await compute(source, now=NOW, **kw)).to_dict()


async def _same_both_ways(url: str, fold: bool) -> None:
    await write_all(url, dataset(days=12, seed=11), fold=fold)
    store = await open_store(url)
    reader = await open_reader(url)
    assert isinstance(reader, Reader)
    try:
        for kw in CASES:
            a, b = await _report(store, **kw), await _report(reader, **kw)
            assert a["rows"], kw
            assert a == b, kw                  # the same figures to the bit, not merely close
        pairs = [(r["agent"], r["target"]) for r in a["rows"]]
        assert await detected_lines(store, pairs, NOW) == await detected_lines(reader, pairs, NOW)
    finally:
        await store.close()
        await reader.close()


@pytest.mark.parametrize("fold", [True, False])
async def test_reader_and_store_give_the_same_report_on_sqlite(tmp_path: Path, fold: bool) -> None:
    await _same_both_ways(f"sqlite:///{tmp_path / 'r.db'}", fold)


async def test_prefix_rows_read_in_parts_give_the_same_report(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """An agent with more series than one statement takes reads its prefix rows in several."""
    from netprobe.store import prefix_read

    url = f"sqlite:///{tmp_path / 'r.db'}"
    await write_all(url, dataset(days=12, seed=11), fold=True)
    reader = await open_reader(url)
    try:
        whole = await _report(reader, days=7)
        monkeypatch.setattr(prefix_read, "_KEYS_PER_READ", 3)
        assert await _report(reader, days=7) == whole
    finally:
        await reader.close()


@pytest.mark.postgres
async def test_reader_and_store_give_the_same_report_on_postgres() -> None:
    with scratch_database() as url:
        await _same_both_ways(url, True)


@pytest.mark.parametrize("fold", [True, False])
async def test_rows_without_profiles_are_the_rows_with_them(tmp_path: Path, fold: bool) -> None:
    """The table and Markdown show no 24-hour profile, so their report reads the RTT probe in the
    windows' hours only: every other figure is the same, to the bit, as with the profiles."""
    url = f"sqlite:///{tmp_path / 'p.db'}"
    await write_all(url, dataset(days=12, seed=11), fold=fold)
    source = await open_reader(url)      # unfolded too: the tails' path (open_source would refuse it)
    assert source is not None
    try:
        for kw in CASES:
            full, lean = await _report(source, **kw), await _report(source, profiles=False, **kw)
            assert lean["rows"] and all(r["profile"] == [] for r in lean["rows"]), kw
            assert any(r["profile"] for r in full["rows"]) or kw.get("peak_only"), kw
            for r in full["rows"]:
                r["profile"] = []
            assert full == lean, kw
    finally:
        await source.close()


async def test_open_reader_takes_only_a_database_at_the_head(tmp_path: Path) -> None:
    missing = tmp_path / "none.db"
    assert await open_reader(f"sqlite:///{missing}") is None
    assert not missing.exists()                         # nothing created: open_store does that
    assert await open_reader("sqlite://") is None       # in memory: only the Store's own connection
    plain = tmp_path / "plain.db"
    import sqlite3

    sqlite3.connect(plain).close()                      # a file without the schema
    assert await open_reader(f"sqlite:///{plain}") is None
    source = await open_source(f"sqlite:///{plain}")    # the Store, which migrates it
    await source.close()
    reader = await open_reader(f"sqlite:///{plain}")
    assert isinstance(reader, Reader)
    await reader.close()


def test_lists_and_rows_of_values_expand_for_each_driver() -> None:
    sql, args = prepare("sqlite", "x IN %(a)s AND (p, q) IN %(k)s AND y = %(b)s",
                        {"a": [1, 2], "k": [("u", 1)], "b": 3})
    assert sql == "x IN (:a_0, :a_1) AND (p, q) IN (VALUES (:k_0_0, :k_0_1)) AND y = :b"
    assert args == {"a_0": 1, "a_1": 2, "k_0_0": "u", "k_0_1": 1, "b": 3}
    sql, _ = prepare("postgresql", "x IN %(a)s", {"a": ["z"]})
    assert sql == "x IN (%(a_0)s)"
    sql, args = prepare("postgresql", "FROM %(k)s v", {"k": [("u", 1, NOW), ("w", 2, NOW)]})
    # rows as arrays: three parameters, sent in binary (psycopg's text arrays quote each item by regex)
    assert sql == ("FROM (SELECT * FROM unnest(%(k_0)b::text[], %(k_1)b::bigint[], %(k_2)b::timestamptz[])"
                   " AS k(column1, column2, column3)) v")
    assert args == {"k_0": ["u", "w"], "k_1": [1, 2], "k_2": [NOW, NOW]}
    stamp = prepare("sqlite", "%(t)s", {"t": NOW})[1]["t"]
    assert stamp == NOW.replace(tzinfo=None).isoformat(" ", "microseconds")   # as SQLAlchemy stores it


@pytest.mark.postgres
async def test_rows_of_values_read_back_exactly_on_postgres() -> None:
    """Rows sent as one array per column give back every value: quotes, NULLs, non-ASCII, big ints,
    floats to the bit (-0.0 and not finite ones too), bytes, timestamps to the microsecond, the rows'
    order."""
    rows = [("a'b\"c\\d", None, 2**62, 0.1 + 0.2, NOW, True), ("é → 中", 7, -1, 5e-324, NOW, None),
            (None, 8, 0, -1.7976931348623157e308, NOW.replace(microsecond=1), False)]
    signed = [("z", 0, 0, -0.0, NOW, b"\x00\xff"), ("y", 1, 1, float("inf"), NOW, b"")]
    with scratch_database() as url:
        await (await open_source(url)).close()          # the Store migrates it: the Reader takes it
        reader = await open_reader(url)
        assert isinstance(reader, Reader)
        try:
            async with reader.reading("testing") as conn:
                got = await conn.fetch("SELECT * FROM %(k)s v", {"k": rows})
                zero = await conn.fetch("SELECT * FROM %(k)s v", {"k": signed})
        finally:
            await reader.close()
    assert got == rows
    assert zero == signed and str(zero[0][3]) == "-0.0"
    assert all(isinstance(row[4], datetime) and row[4].tzinfo is UTC for row in got)


@pytest.mark.postgres
def test_a_report_on_postgres_reads_without_sqlalchemy() -> None:
    """The Reader reads on psycopg alone: a report's process never imports SQLAlchemy."""
    import asyncio

    with scratch_database() as url:
        asyncio.run(write_all(url, dataset(days=12, seed=11), fold=True))
        code = f"""
import asyncio, sys
from datetime import datetime
from netprobe.report.peak import compute
from netprobe.store.source import open_source

async def main():
    source = await open_source({url!r})
    try:
        report = await compute(source, days=7, now=datetime.fromisoformat({NOW.isoformat()!r}))
    finally:
        await source.close()
    print(type(source).__name__, len(report.rows), sum(r.detected_line is not None for r in report.rows))

asyncio.run(main())
print(sorted({{m.split('.')[0] for m in sys.modules}} & {{'asyncpg', 'sqlalchemy'}}))
"""
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False,
                              timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        kind, rows, lines, *_ = done.stdout.split()
        assert (kind, done.stdout.splitlines()[-1]) == ("Reader", "[]")
        assert int(rows) > 0 and int(lines) > 0       # the routes' JSON read as psycopg decodes it


@pytest.mark.postgres
async def test_libpq_url_parameters_are_libpqs() -> None:
    """The Reader hands the URL to libpq as it is: every parameter libpq takes works, and one it
    refuses fails with libpq's own words."""
    with scratch_database() as url:
        await write_all(url, dataset(days=2, seed=3))
        for query in ("connect_timeout=5", "connect_timeout=0", "application_name=np", "keepalives=1",
                      "options=-c%20statement_timeout%3D60000"):
            source = await open_source(f"{url}?{query}")
            try:
                assert isinstance(source, Reader), query
                assert (await _report(source, days=2))["rows"], query
            finally:
                await source.close()
        assert await open_reader(f"{url}?nosuchoption=1") is None
        with pytest.raises(StorageError, match="nosuchoption"):
            await open_source(f"{url}?nosuchoption=1")


def test_the_read_path_does_not_import_sqlalchemy() -> None:
    code = ("import sys, netprobe.report.peak, netprobe.report.cli, netprobe.budget.cli;"
            "import netprobe.store.reads, netprobe.store.fleet, netprobe.store.prefix_read;"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] == 'sqlalchemy'); print(bad);"
            "sys.exit(1 if bad else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_report_on_a_database_never_folded_says_what_to_run(tmp_path: Path) -> None:
    """Hourly rollups older than two days and no fold ever (a copy of the hourly table alone, say): the
    report would read every hour, so it names the command instead, and runs once it has run."""
    db = tmp_path / "unfolded.db"
    url = f"sqlite:///{db}"
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    asyncio.run(write_all(url, dataset(now=now, days=4, seed=2), fold=False))
    run = [sys.executable, "-m", "netprobe.cli"]
    got = subprocess.run([*run, "report", "peak", "--db", url, "--format", "json"], capture_output=True,
                         text=True, timeout=120)
    assert got.returncode == 1 and f"netprobe db rebuild-rollups --db {url}" in got.stderr, got.stderr
    subprocess.run([*run, "db", "rebuild-rollups", "--db", url], check=True, capture_output=True, timeout=120)
    got = subprocess.run([*run, "report", "peak", "--db", url, "--format", "json"], capture_output=True,
                         text=True, timeout=120)
    assert got.returncode == 0 and json.loads(got.stdout)["rows"], got.stderr
