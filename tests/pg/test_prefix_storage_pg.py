"""Migration 0010 on the real server: a database whose prefix values an earlier 0009 kept in the row
(STORAGE MAIN, LZ4) has them stored the default way again (compressed out of line), with the same
bytes and the same report; a database that never had them in the row is left alone."""

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


def _into_the_row(url: str) -> None:
    """What the earlier 0009 did: the values stored MAIN, LZ4-compressed, existing rows made anew."""
    how = ", ".join(f"ALTER {c} SET STORAGE MAIN, ALTER {c} SET COMPRESSION lz4" for c in VALUES)
    made = ", ".join(f"{c} = {c} || ''::bytea" for c in VALUES)
    with psycopg.connect(_dsn(url)) as conn:
        conn.execute(f"ALTER TABLE rollups_prefix {how}")
        conn.execute(f"UPDATE rollups_prefix SET {made}")


async def _migrated(url: str, to: str | None = None) -> str | None:
    store = await open_store(url)
    try:
        return await (store.downgrade(to) if to is not None else store.upgrade())
    finally:
        await store.close()


async def test_values_kept_in_the_row_go_back_to_the_toast_with_the_same_bytes(tmp_path: Path) -> None:
    with scratch_database() as url:
        await write_all(url, dataset(days=8, seed=3))
        head = _state(url)
        report = await _report(url)
        # This server (Debian's PostgreSQL 15) has LZ4; a payload of 8 days is big enough to compress.
        assert head["lz4"]
        assert set(head["columns"].values()) == {("x", "")}      # the server's defaults
        assert head["methods"] == {"pglz"}
        assert head["rows"] and head["pk"] == "pk_rollups_prefix"

        assert await _migrated(url, "0009") == "0009"
        assert _state(url) == head                                 # nothing to undo: left alone
        _into_the_row(url)
        inline = _state(url)
        assert set(inline["columns"].values()) == {("m", "l")} and inline["methods"] == {"lz4"}
        assert inline["rows"] == head["rows"]

        assert await _migrated(url) == head_revision()
        again = _state(url)
        assert set(again["columns"].values()) == {("x", "")} and again["methods"] == {"pglz"}
        assert again["rows"] == head["rows"] and again["pk"] == "pk_rollups_prefix"
        assert await _report(url) == report
