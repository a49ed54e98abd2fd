"""Migration 0009 on the real server: the prefix rows' values kept in the row and LZ4-compressed, existing
rows rewritten so, the same bytes and the same report either way (and back on a downgrade)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

from netprobe.report.peak import compute
from netprobe.store import open_store
from netprobe.store.migrate import head_revision
from tests.support.pg import scratch_database
from tests.support.report import NOW, dataset, write_all

pytestmark = pytest.mark.postgres

VALUES = ("payload", *(f"l{k}" for k in range(10)))
KEY = "agent_id, target_id, probe, folded_until"


def _dsn(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


def _state(url: str) -> dict[str, Any]:
    """What the server stores: each value column's storage and compression, the methods the stored
    values are compressed with, the rows' bytes, the primary key's name."""
    with psycopg.connect(_dsn(url)) as conn:
        columns = {name: (storage, compression) for name, storage, compression in conn.execute(
            "SELECT attname, attstorage, attcompression FROM pg_attribute"
            " WHERE attrelid = 'rollups_prefix'::regclass AND attname = ANY(%s)", [list(VALUES)])}
        methods = {m for (m,) in conn.execute(
            "SELECT DISTINCT pg_column_compression(payload) FROM rollups_prefix")}
        rows = conn.execute(f"SELECT {KEY}, zone, hours, {', '.join(VALUES)} FROM rollups_prefix"
                            f" ORDER BY {KEY}").fetchall()
        [pk] = conn.execute("SELECT conname FROM pg_constraint WHERE conrelid = 'rollups_prefix'::regclass"
                            " AND contype = 'p'").fetchone() or [None]
        lz4 = conn.execute("SELECT 'lz4' = ANY(enumvals) FROM pg_settings"
                           " WHERE name = 'default_toast_compression'").fetchone()
    return {"columns": columns, "methods": methods, "rows": rows, "pk": pk, "lz4": bool(lz4 and lz4[0])}


async def _report(url: str) -> dict[str, Any]:
    store = await open_store(url)
    try:
        return (await compute(store, days=7, window="22-2", offpeak="3-6", now=NOW)).to_dict()
    finally:
        await store.close()


async def test_prefix_values_move_into_the_row_and_back_with_the_same_bytes(tmp_path: Path) -> None:
    with scratch_database() as url:
        await write_all(url, dataset(days=8, seed=3))
        head = _state(url)
        report = await _report(url)
        # This server (Debian's PostgreSQL 15) has LZ4; a payload of 8 days is big enough to compress.
        assert head["lz4"]
        assert set(head["columns"].values()) == {("m", "l")}
        assert head["methods"] == {"lz4"}
        assert head["rows"] and head["pk"] == "pk_rollups_prefix"

        store = await open_store(url)
        try:
            assert await store.downgrade("0008") == "0008"
        finally:
            await store.close()
        before = _state(url)
        assert set(before["columns"].values()) == {("x", "p")}
        assert before["methods"] == {"pglz"}
        assert before["rows"] == head["rows"] and before["pk"] == "pk_rollups_prefix"
        assert await _report(url) == report

        store = await open_store(url)
        try:
            assert await store.upgrade() == head_revision()
        finally:
            await store.close()
        again = _state(url)
        assert again["columns"] == head["columns"] and again["methods"] == {"lz4"}
        assert again["rows"] == head["rows"] and again["pk"] == "pk_rollups_prefix"
        assert await _report(url) == report
