"""The store on SQLite: migrations, idempotent writes with rollups, retention, URLs, bad envelopes."""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import inspect

from netprobe.errors import StorageError, UsageError
from netprobe.stats import jitter
from netprobe.store import EnvelopeError, Store, default_db_url, normalise_url, open_store, state_dir
from netprobe.store.migrate import head_revision
from tests.support.store import (
    TABLES,
    connection,
    count_results,
    hourly,
    icmp_envelope,
    path_events,
    schema_diff,
    table_names,
    typed,
    window_stats,
)

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'sub' / 'netprobe.db'}"


@pytest.fixture
async def store(url: str) -> AsyncIterator[Store]:
    s = await open_store(url)
    yield s
    await s.close()


async def test_migrations_up_down_up_and_match_the_models(store: Store, url: str) -> None:
    async with connection(url) as conn:
        assert TABLES <= await conn.run_sync(table_names)
        assert await conn.run_sync(schema_diff) == []
    assert await store.revision() == head_revision()
    assert await store.downgrade("base") is None
    async with connection(url) as conn:
        assert not (TABLES & await conn.run_sync(table_names))
    assert await store.upgrade() == head_revision()
    async with connection(url) as conn:
        assert TABLES <= await conn.run_sync(table_names)


async def test_route_events_stored_before_0006_are_forward(store: Store, url: str) -> None:
    """0006 adds path_changes.direction: the events already stored were all mtr's, the forward path."""
    from tests.support.path_events import CN2, GT, mtr_envelope, t

    await store.write(typed([mtr_envelope(t(0), CN2), mtr_envelope(t(5), GT, mismatch=False)]))
    assert await store.downgrade("0005") == "0005"
    async with connection(url) as conn:
        assert "direction" not in {c["name"] for c in await conn.run_sync(
            lambda sync: inspect(sync).get_columns("path_changes"))}
    assert await store.upgrade() == head_revision()
    [event] = await path_events(store)
    assert (event.kind, event.direction) == ("path_change", "forward")
    async with connection(url) as conn:
        assert await conn.run_sync(schema_diff) == []


async def test_sqlite_pragmas_and_directory_created(store: Store, url: str, tmp_path: Path) -> None:
    assert (tmp_path / "sub" / "netprobe.db").is_file()
    async with connection(url) as conn:      # a connection as the store's engine makes them
        got = {p: (await conn.exec_driver_sql(f"PRAGMA {p}")).scalar()
               for p in ("journal_mode", "foreign_keys", "synchronous", "busy_timeout")}
    assert got["journal_mode"] == "wal" and got["foreign_keys"] == 1 and got["synchronous"] == 1
    assert int(got["busy_timeout"] or 0) >= 5000


async def test_write_is_idempotent_and_rollups_are_not_doubled(store: Store) -> None:
    rng = random.Random(1)
    envs = [icmp_envelope(T0 + timedelta(minutes=7 * i),
                          [rng.uniform(30, 60) if rng.random() > 0.1 else None for _ in range(20)],
                          duplicates=i % 2)
            for i in range(20)]
    first = await store.write(typed(envs))
    assert (first.accepted, first.duplicates) == (20, 0)
    rows_before = await hourly(store, None, None, "icmp", T0, T0 + timedelta(hours=4))
    again = await store.write(typed(envs[:10] + envs[:3]))      # replay + repeats inside the batch
    assert (again.accepted, again.duplicates) == (0, 13)
    assert await count_results(store) == 20
    rows = await hourly(store, None, None, "icmp", T0, T0 + timedelta(hours=4))
    assert rows == rows_before

    # every hour's figures equal what the raw samples say
    for row in rows:
        mine = [e for e in envs if row.hour <= datetime.fromisoformat(e["started_at"]) < row.hour
                + timedelta(hours=1)]
        samples = [s for e in mine for s in e["result"]["samples_ms"] if s is not None]
        sent = sum(e["result"]["sent"] for e in mine)
        assert row.rounds == len(mine)
        assert row.sent == sent and row.received == len(samples) and row.samples == len(samples)
        assert row.duplicates == sum(e["result"]["duplicates"] for e in mine)
        assert row.loss_pct == pytest.approx(100 * (sent - len(samples)) / sent)
        assert row.rtt_min_ms == min(samples) and row.rtt_max_ms == max(samples)
        assert row.rtt_avg_ms == pytest.approx(math.fsum(samples) / len(samples))
        jitters = [j for e in mine if (j := jitter(e["result"]["samples_ms"])) is not None]
        assert row.jitter_ms == pytest.approx(sum(jitters) / len(jitters))
    assert sum(r.rounds for r in rows) == 20

    # stored envelopes are returned as written, typed
    rows_back = await store.results(probe="icmp")
    back = [r.envelope.raw for r in rows_back]
    assert [e["id"] for e in back] == [e["id"] for e in envs]
    assert back[3] == envs[3]
    assert rows_back[3].envelope == typed([envs[3]])[0]
    assert rows_back[3].envelope.result == typed([envs[3]])[0].result


async def test_failed_rounds_are_counted_without_samples(store: Store) -> None:
    await store.write(typed([icmp_envelope(T0, [None] * 5),
                             icmp_envelope(T0 + timedelta(minutes=1), [10.0, 12.0])]))
    stats = await window_stats(store, "sh-ct-1", "hk-cn2", "icmp", T0, T0 + timedelta(hours=1))
    assert stats is not None
    assert (stats.rounds, stats.error_rounds, stats.sent, stats.received) == (2, 1, 7, 2)
    assert stats.loss_pct == pytest.approx(500 / 7)
    assert stats.loss_pct_mean == pytest.approx(50.0)
    assert stats.rtt_min_ms == 10.0 and stats.rtt_max_ms == 12.0


async def test_a_bad_envelope_rejects_the_whole_batch_naming_the_field(store: Store) -> None:
    good = icmp_envelope(T0, [1.0])
    bad = icmp_envelope(T0, [1.0])
    bad["started_at"] = "yesterday"
    with pytest.raises(EnvelopeError, match=r"envelope 1: started_at"):
        await store.write(typed([good, bad]))
    no_status = icmp_envelope(T0, [1.0])
    del no_status["result"]["status"]
    with pytest.raises(EnvelopeError, match=r"envelope 0: result\.status"):
        await store.write(typed([no_status]))
    with pytest.raises(EnvelopeError, match="expected a JSON object"):
        await store.write(typed(["nope"]))  # type: ignore[list-item]
    with pytest.raises(TypeError, match="takes Envelopes"):    # JSON is validated where it comes in
        await store.write([good])  # type: ignore[list-item]
    assert await count_results(store) == 0


async def test_retention_deletes_raw_keeps_rollups_and_refuses_replays(store: Store) -> None:
    now = T0 + timedelta(days=20)
    envs = typed(icmp_envelope(T0 + timedelta(days=d), [20.0, 21.0, 22.0]) for d in range(20))
    await store.write(envs)
    before = await window_stats(store, None, None, "icmp", T0, now)
    assert before is not None and before.rounds == 20

    deleted = await store.enforce_retention(14, now=now)
    assert deleted == 6                                     # days 0..5 are older than 14 days
    assert await count_results(store) == 14
    assert await count_results(store, start=now - timedelta(days=14)) == 14
    after = await window_stats(store, None, None, "icmp", T0, now)
    assert after == before and after.rounds == 20

    # a replay of a deleted round cannot be told from a new one: refused, rollups unchanged
    stats = await store.write(envs)
    assert (stats.accepted, stats.duplicates, stats.expired) == (0, 14, 6)
    assert await window_stats(store, None, None, "icmp", T0, now) == before
    with pytest.raises(ValueError):
        await store.enforce_retention(0)


async def test_two_sqlite_writers_at_once_lose_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    a, b = await open_store(url), await open_store(url)
    try:
        batches = [typed(icmp_envelope(T0 + timedelta(seconds=i * 10 + j), [5.0, 6.0]) for j in range(5))
                   for i in range(24)]
        results = await asyncio.gather(*(s.write(batch) for s, batch in
                                          zip([a, b] * 12, batches, strict=True)))
        assert sum(r.accepted for r in results) == 120
        stats = await window_stats(a, None, None, "icmp", T0, T0 + timedelta(hours=1))
        assert stats is not None and stats.rounds == 120 and stats.samples == 240
    finally:
        await a.close()
        await b.close()


def test_urls_are_normalised_to_async_drivers() -> None:
    assert str(normalise_url("sqlite:////abs/x.db")) == "sqlite+pysqlite:////abs/x.db"
    assert str(normalise_url("sqlite:///rel.db")) == "sqlite+pysqlite:///rel.db"
    assert str(normalise_url("postgresql://u@h/db")) == "postgresql+psycopg://u@h/db"
    assert str(normalise_url("postgresql+psycopg://u@h/db")) == "postgresql+psycopg://u@h/db"
    assert str(normalise_url("postgres://u@h:5433/db")) == "postgresql+psycopg://u@h:5433/db"
    with pytest.raises(UsageError, match="unsupported database 'mysql'"):
        normalise_url("mysql://u:secret@h/db")
    with pytest.raises(UsageError, match="not a database URL"):
        normalise_url("no url here")


def test_state_dir_and_default_url(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("STATE_DIRECTORY", f"{tmp_path}/state:{tmp_path}/other")
    assert state_dir() == tmp_path / "state"
    assert default_db_url() == f"sqlite:///{tmp_path}/state/netprobe.db"
    monkeypatch.delenv("STATE_DIRECTORY")
    monkeypatch.setattr("os.geteuid", lambda: 0)
    assert state_dir() == Path("/var/lib/netprobe")
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    assert state_dir() == tmp_path / ".local" / "state" / "netprobe"


async def test_relative_sqlite_url_and_default_location(monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    s = await open_store("sqlite:///rel.db")
    await s.close()
    assert (tmp_path / "rel.db").is_file()
    monkeypatch.setenv("STATE_DIRECTORY", str(tmp_path / "svc"))
    s = await open_store(None)
    await s.close()
    assert (tmp_path / "svc" / "netprobe.db").is_file()


async def test_unopenable_database_is_a_storage_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(StorageError, match="cannot create the directory"):
        await open_store(f"sqlite:///{blocker}/x/netprobe.db")
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StorageError, match=r"garbage\.db"):
        await open_store(f"sqlite:///{garbage}")


async def test_naive_datetimes_are_refused(store: Store) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        await store.results(start=datetime(2026, 1, 1), end=T0)
