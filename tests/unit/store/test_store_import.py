"""`netprobe db import` of a few thousand envelopes, run as a user runs it (subprocess, a terminal for its
progress bar), into SQLite and a real PostgreSQL database: what it stores is what Store.write stores
for the same envelopes written one batch at a time, every round and rollup exactly once."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import os
import pty
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import MetaData, select

from netprobe.store import open_store
from netprobe.store.cli import IMPORT_BATCH, PROGRESS_BYTES
from netprobe.store.prefix import decode_level, decode_sums
from tests.support.pg import scratch_database
from tests.support.report import dataset
from tests.support.store import connection, typed

# written at write time, not part of what was stored
_WHEN = {"stored_at", "updated_at", "first_seen", "last_seen"}
_TABLES = ("agents", "targets", "probe_results", "path_changes")   # and every rollups_* table


@pytest.fixture(params=["sqlite", "postgresql"])
def db_urls(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(the database to import into, a reference database written through Store.write), both empty."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'import.db'}", f"sqlite:///{tmp_path / 'reference.db'}"
    else:
        with scratch_database() as url, scratch_database() as reference:
            yield url, reference


def _bad_lines(envs: list[dict[str, Any]]) -> list[tuple[bytes, str]]:
    """Bad lines, each with the start of its message."""
    field = json.loads(json.dumps(envs[0]))
    field["result"]["sent"] = "many"
    atlas = {"type": "ping", "prb_id": 6012, "timestamp": "soon", "dst_addr": "198.51.100.7", "result": []}
    return [(b"{not json", "not JSON"), (json.dumps(field).encode(), "result.sent"),
            (b"[1, 2]", "expected a JSON object"), (b"\xff\xfe not utf-8", "not UTF-8"),
            (json.dumps({**envs[1], "agent": {}}).encode(), "agent.id"),
            (json.dumps(atlas).encode(), "an Atlas result needs"),
            (json.dumps({**envs[2], "started_at": "yesterday"}).encode(), "started_at")]


def _file(path: Path, envs: list[dict[str, Any]]) -> tuple[dict[int, str], int]:
    """Every envelope once, bad lines, blank lines and repeated envelopes interleaved throughout (some
    repeats in the same batch as their first line, some batches later); returns {line number: message}
    of the bad lines and the number of repeats."""
    bad = _bad_lines(envs)
    lines: list[bytes] = []
    expected: dict[int, str] = {}
    repeats = 0
    for i, env in enumerate(envs):
        lines.append(json.dumps(env).encode())
        if i % 397 == 200:
            raw, message = bad[(i // 397) % len(bad)]
            lines.append(raw)
            expected[len(lines)] = message
        if i % 701 == 350:
            lines.append(b"   ")
        if i % 613 == 300:
            lines.append(json.dumps(envs[i - 250 if i % 2 else i // 3]).encode())
            repeats += 1
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return expected, repeats


def _import(src: Path, url: str) -> tuple[subprocess.CompletedProcess[str], str]:
    """`netprobe db import` with stderr on a terminal (as a user runs it): the result, and what the
    terminal showed."""
    master, slave = pty.openpty()
    shown: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:    # the child closed its end
                return
            if not data:
                return
            shown.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        out = subprocess.run([sys.executable, "-m", "netprobe.cli", "db", "import", str(src), "--db", url],
                             stdout=subprocess.PIPE, stderr=slave, text=True, timeout=120,
                             env={**os.environ, "TERM": "xterm", "COLUMNS": "200"})
    finally:
        os.close(slave)
        reader.join(10)
        os.close(master)
    return out, b"".join(shown).decode(errors="replace")


async def _write_in_batches(url: str, envs: list[dict[str, Any]], batch: int) -> None:
    store = await open_store(url)
    try:
        for i in range(0, len(envs), batch):
            await store.write(typed(envs[i:i + batch]))
        await store.fold_rollups()          # as the agent's and the collector's upkeep does
    finally:
        await store.close()


def _value(k: str, v: Any) -> Any:
    if k == "payload" and isinstance(v, bytes):        # prefix sums: floats summed in another grouping
        return {h: dataclasses.asdict(sums) for h, sums in decode_sums(v).items()}
    if re.fullmatch(r"l\d", k) and isinstance(v, bytes):
        return decode_level(v)
    if isinstance(v, str) and v[:1] in ("{", "["):
        try:
            return json.loads(v)
        except ValueError:
            return v
    return v


async def _snapshot(url: str) -> dict[str, list[dict[str, Any]]]:
    """Every row of the stored tables (the rollups_* tables whatever they are), JSON text decoded,
    without write times and path_changes' serial id, in a stable order."""
    async with connection(url) as conn:
        meta = MetaData()
        await conn.run_sync(meta.reflect)
        names = [n for n in sorted(meta.tables) if n in _TABLES or n.startswith("rollups")]
        assert "rollups_hourly" in names
        out: dict[str, list[dict[str, Any]]] = {}
        for name in names:
            table = meta.tables[name]
            rows = [{k: _value(k, v) for k, v in row.items()
                     if k not in _WHEN and not (name == "path_changes" and k == "id")}
                    for row in (await conn.execute(select(table))).mappings()]
            out[name] = sorted(rows, key=_order)
        return out


def _order(row: dict[str, Any]) -> tuple[str, ...]:
    return tuple(str(v) for _, v in sorted(row.items()) if not isinstance(v, float | dict | list))


def _same(a: Any, b: Any, where: str) -> None:
    """Equal, floats within rounding: sums merged batch by batch add in another grouping."""
    if isinstance(a, float) and isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9), f"{where}: {a} != {b}"
    elif isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), f"{where}: keys {sorted(a)} != {sorted(b)}"
        for k in a:
            _same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), f"{where}: {len(a)} items != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def _same_tables(got: dict[str, list[dict[str, Any]]], want: dict[str, list[dict[str, Any]]]) -> None:
    assert got.keys() == want.keys()
    for name in want:
        assert len(got[name]) == len(want[name]), name
        for i, (g, w) in enumerate(zip(got[name], want[name], strict=True)):
            _same(g, w, f"{name}[{i}]")


def test_import_stores_what_store_write_does_once_each_bad_lines_skipped(
        db_urls: tuple[str, str], tmp_path: Path) -> None:
    url, reference = db_urls
    envs = dataset(days=12)               # icmp, tcp, sse, mtr with route events: ~9,000 envelopes
    assert len(envs) > IMPORT_BATCH          # more than one batch
    src = tmp_path / "results.jsonl"
    bad, repeats = _file(src, envs)
    assert src.stat().st_size > PROGRESS_BYTES and len(bad) >= 2 * len(_bad_lines(envs))

    out, terminal = _import(src, url)
    assert out.returncode == 1, out.stdout + terminal
    assert (f"imported {len(envs)} results" in out.stdout and f"({repeats} duplicates skipped" in out.stdout
            and f"{len(bad)} bad lines skipped" in out.stdout), out.stdout
    reported = {int(n): m for n, m in re.findall(rf"{re.escape(str(src))}:(\d+): ([^\r\n]*)", terminal)}
    assert sorted(reported) == sorted(bad), terminal[-2000:]
    for n, message in bad.items():
        assert reported[n].startswith(message) and reported[n].endswith("(line skipped)"), reported[n]
    assert "importing" in terminal and "Traceback" not in terminal     # the progress bar, on a terminal

    asyncio.run(_write_in_batches(reference, envs, 500))
    want = asyncio.run(_snapshot(reference))
    assert len(want["probe_results"]) == len(envs) and want["path_changes"]
    assert sum(r["rounds"] for r in want["rollups_hourly"]) == len(envs)
    assert want["rollups_prefix"] and "prefix rollups: " in out.stdout    # folded: no report waits for it
    _same_tables(asyncio.run(_snapshot(url)), want)

    clean = tmp_path / "clean.jsonl"       # again: nothing new, nothing rolled up twice
    clean.write_text("".join(json.dumps(e) + "\n" for e in envs))
    again, _ = _import(clean, url)
    assert again.returncode == 0 and "imported 0 results" in again.stdout
    assert f"({len(envs)} duplicates skipped)" in again.stdout
    _same_tables(asyncio.run(_snapshot(url)), want)
