"""The store on the real PostgreSQL server: migrations, idempotent ingest, concurrent writers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.engine import make_url

from netprobe.errors import StorageError
from netprobe.store import Store, open_store
from netprobe.store.migrate import head_revision
from tests.support.path_events import CN2, mtr_envelope
from tests.support.pg import scratch_database
from tests.support.store import (
    TABLES,
    connection,
    count_results,
    hourly,
    icmp_envelope,
    schema_diff,
    table_names,
    typed,
)

pytestmark = pytest.mark.postgres

T0 = datetime(2026, 11, 20, 20, 0, tzinfo=UTC)


@pytest.fixture
async def store(pg_url: str) -> AsyncIterator[Store]:
    s = await open_store(pg_url)
    yield s
    await s.close()


async def test_a_real_reads_back_as_a_real(store: Store) -> None:
    """jsonb writes a stored 1e308 back without its exponent; read, it is the float it was, not an
    integer of 309 digits (counts stay integers)."""
    await store.write(typed([icmp_envelope(T0, [1e308])]))
    [row] = await store.results()
    result = row.envelope.raw["result"]
    assert result["samples_ms"] == [1e308] and type(result["samples_ms"][0]) is float
    assert result["rtt_ms"]["max"] == 1e308 and type(result["rtt_ms"]["max"]) is float
    assert type(result["sent"]) is int and result["sent"] == 1


async def test_migrations_up_down_up_and_match_the_models(store: Store, pg_url: str) -> None:
    assert store.dialect == "postgresql"
    async with connection(pg_url) as conn:
        assert TABLES <= await conn.run_sync(table_names)
        assert await conn.run_sync(schema_diff) == []
    assert await store.downgrade("base") is None
    async with connection(pg_url) as conn:
        assert not (TABLES & await conn.run_sync(table_names))
    assert await store.upgrade() == head_revision()
    assert await store.upgrade() == head_revision()            # a second upgrade is a no-op


async def test_write_replay_and_timestamps(store: Store) -> None:
    envs = typed(icmp_envelope(T0 + timedelta(minutes=10 * i), [30.0 + i, 31.0, None]) for i in range(12))
    assert (await store.write(envs)).accepted == 12
    before = await hourly(store, "sh-ct-1", "hk-cn2", "icmp", T0, T0 + timedelta(hours=3))
    replay = await store.write(envs + envs[:2])
    assert (replay.accepted, replay.duplicates) == (0, 14)
    rows = await hourly(store, "sh-ct-1", "hk-cn2", "icmp", T0, T0 + timedelta(hours=3))
    assert rows == before
    assert [r.hour for r in rows] == [T0, T0 + timedelta(hours=1)]
    assert all(r.hour.tzinfo is UTC for r in rows)
    assert [r.rounds for r in rows] == [6, 6] and rows[0].sent == 18 and rows[0].received == 12
    assert await count_results(store, "sh-ct-1", "hk-cn2", "icmp", T0, T0 + timedelta(hours=1)) == 6
    assert (await store.results(limit=1))[0].envelope.raw == envs[0].raw
    assert await store.enforce_retention(1, now=T0 + timedelta(days=1, minutes=35)) == 4


async def test_concurrent_writers_to_one_hour_lose_no_update(pg_url: str) -> None:
    """Many batches for the same agent × target × hour at once, from two stores (two collectors),
    with some batches replayed concurrently: the hour row counts every unique round exactly once."""
    a, b = await open_store(pg_url), await open_store(pg_url)
    try:
        batches = [typed(icmp_envelope(T0 + timedelta(seconds=60 * i + j), [10.0 + j, 11.0, 12.0, None])
                         for j in range(5)) for i in range(40)]
        jobs = [(a if i % 2 else b).write(batch) for i, batch in enumerate(batches)]
        jobs += [(b if i % 2 else a).write(batches[i]) for i in range(0, 40, 4)]    # replays, racing
        results = await asyncio.gather(*jobs)
        assert sum(r.accepted for r in results) == 200
        assert sum(r.duplicates for r in results) == 50
        rows = await hourly(a, None, None, "icmp", T0, T0 + timedelta(hours=1))
        assert len(rows) == 1
        row = rows[0]
        assert (row.rounds, row.sent, row.received, row.samples) == (200, 800, 600, 600)
        assert row.rtt_min_ms == 10.0 and row.rtt_max_ms == 14.0
        assert row.rollup.sketch is not None and row.rollup.sketch.count == 600
    finally:
        await a.close()
        await b.close()


async def test_writers_of_shared_targets_with_routes_do_not_deadlock(pg_url: str) -> None:
    """Collectors' requests from many agents over the same targets, mtr among them, at once. A writer
    locks the targets its route results need (target order), and inserting results checks each one's
    target (result-id order, which is not target order): those checks must not wait on the locks, or
    two writers deadlock and a request is refused (seen: 3,200 of 10,000 rounds lost in bench/ingest)."""
    stores = [await open_store(pg_url) for _ in range(4)]
    try:
        targets = [f"t{n:02d}" for n in range(12)]

        def batch(agent: int, minute: int) -> list[dict[str, object]]:
            # result ids run against the targets' order, so checks and locks meet in opposite orders
            at = T0 + timedelta(minutes=minute)
            return [mtr_envelope(at, CN2, agent=f"a{agent}", target=tid,
                                 result_id=f"m-{agent}-{minute}-{99 - n:02d}")
                    if n % 3 == 0 else
                    icmp_envelope(at, [20.0, 21.0], agent=f"a{agent}", target=tid,
                                  result_id=f"i-{agent}-{minute}-{99 - n:02d}")
                    for n, tid in enumerate(targets[agent % 3:] + targets[:agent % 3])]

        await stores[0].write(typed(batch(0, 0)))       # the targets exist; writers then skip the upsert
        for s in stores:
            await s.write(typed(batch(0, 0)))            # ... once each store has seen them (as cached)
        jobs = [stores[(agent + minute) % 4].write(typed(batch(agent, minute)))
                for minute in range(1, 11) for agent in range(8)]
        results = await asyncio.gather(*jobs)
        assert sum(r.accepted for r in results) == 10 * 8 * 12
        assert await count_results(stores[0]) == 12 + 10 * 8 * 12
    finally:
        for s in stores:
            await s.close()


async def test_unreachable_or_missing_database_is_a_storage_error(pg_url: str) -> None:
    with pytest.raises(StorageError, match=r"127\.0\.0\.1.*(refused|failed)"):
        await open_store("postgresql://postgres@127.0.0.1:1/test")
    missing = make_url(pg_url).set(database="netprobe_no_such_db").render_as_string(hide_password=False)
    with pytest.raises(StorageError, match="does not exist"):
        await open_store(missing)


async def test_bulk_writers_racing_to_one_hour_lose_no_update(pg_url: str) -> None:
    """Bulk writes (`db import`: COPY of the rows found missing) racing each other and plain writes to
    the same hour, replays among them: a COPY that collides with a row another writer stored meanwhile
    falls back to the statements, and every unique round still counts exactly once."""
    a, b = await open_store(pg_url), await open_store(pg_url)
    try:
        batches = [typed(icmp_envelope(T0 + timedelta(seconds=60 * i + j), [10.0 + j, 11.0, 12.0, None])
                         for j in range(5)) for i in range(40)]
        jobs = [(a if i % 2 else b).write(batch, bulk=i % 3 != 0) for i, batch in enumerate(batches)]
        jobs += [(b if i % 2 else a).write(batches[i], bulk=True) for i in range(0, 40, 4)]
        results = await asyncio.gather(*jobs)
        assert sum(r.accepted for r in results) == 200
        assert sum(r.duplicates for r in results) == 50
        rows = await hourly(a, None, None, "icmp", T0, T0 + timedelta(hours=1))
        assert len(rows) == 1
        row = rows[0]
        assert (row.rounds, row.sent, row.received, row.samples) == (200, 800, 600, 600)
        assert row.rtt_min_ms == 10.0 and row.rtt_max_ms == 14.0
        assert row.rollup.sketch is not None and row.rollup.sketch.count == 600
        assert await count_results(a) == 200
    finally:
        await a.close()
        await b.close()


async def test_bulk_write_whose_copy_collides_stores_what_a_plain_write_does(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rows a bulk write finds missing are stored by another writer before its COPY (here: the
    lookups find nothing, so the COPY meets the stored rows): it takes the statements' path, with the
    same outcome as a plain write."""
    from sqlalchemy import text

    from netprobe.store import store as store_module

    envs = typed(icmp_envelope(T0 + timedelta(minutes=7 * i), [20.0 + i, None, 21.0]) for i in range(30))
    span = (T0, T0 + timedelta(hours=5))
    with scratch_database() as url:
        plain = await open_store(url)
        try:
            await plain.write(envs[:12])
            await plain.write(envs)
            want = await hourly(plain, None, None, None, *span)
        finally:
            await plain.close()
    assert (await store.write(envs[:12])).accepted == 12
    monkeypatch.setattr(store_module, "_PG_KNOWN_RESULTS", text(
        "SELECT k.id FROM json_array_elements_text(CAST(:ids AS json)) AS k(id) WHERE false"))
    monkeypatch.setattr(store_module, "_PG_KNOWN_HOURS", text(
        "SELECT 1 FROM json_array_elements(CAST(:rows AS json)) WHERE false"))
    stats = await store.write(envs, bulk=True)
    assert (stats.accepted, stats.duplicates) == (18, 12)
    assert await count_results(store) == 30
    got = await hourly(store, None, None, None, *span)
    assert [r.to_dict() for r in got] == [r.to_dict() for r in want] and sum(r.rounds for r in got) == 30
