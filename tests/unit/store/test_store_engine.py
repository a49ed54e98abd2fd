"""netprobe.store.engine's async engine (its own, without sqlalchemy.ext.asyncio): transactions commit
or roll back as the block ends, and a cancelled block still hands its connection back."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sqlalchemy import text

from netprobe.store.engine import AsyncEngine, create_engine
from netprobe.store.urls import is_postgres, normalise_url


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncEngine:
    eng = create_engine(normalise_url(f"sqlite:///{tmp_path / 'e.db'}"))
    async with eng.begin() as conn:
        await conn.execute(text("CREATE TABLE t (x INTEGER)"))
    return eng


async def rows(engine: AsyncEngine) -> list[int]:
    async with engine.connect() as conn:
        return [r[0] for r in await conn.execute(text("SELECT x FROM t ORDER BY x"))]


async def test_begin_commits_and_rolls_back(engine: AsyncEngine) -> None:
    async with engine.begin() as conn:
        await conn.execute(text("INSERT INTO t VALUES (:x)"), [{"x": 1}, {"x": 2}])
    with pytest.raises(RuntimeError):
        async with engine.begin() as conn:
            await conn.execute(text("INSERT INTO t VALUES (3)"))
            raise RuntimeError("boom")
    assert await rows(engine) == [1, 2]
    async with engine.connect() as conn:
        assert (await conn.run_sync(lambda c: c.execute(text("SELECT count(*) FROM t")).scalar())) == 2
    await engine.dispose()


async def test_a_cancelled_transaction_rolls_back_and_returns_its_connection(engine: AsyncEngine) -> None:
    inside = asyncio.Event()

    async def writer() -> None:
        async with engine.begin() as conn:
            await conn.execute(text("INSERT INTO t VALUES (7)"))
            inside.set()
            await asyncio.sleep(60)

    task = asyncio.create_task(writer())
    await inside.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert engine.sync_engine.pool.checkedout() == 0  # type: ignore[attr-defined]
    assert await rows(engine) == []
    await engine.dispose()


async def test_a_writer_waiting_for_the_lock_does_not_stop_the_one_holding_it(engine: AsyncEngine) -> None:
    """Each connection's calls have their own thread: the second writer waits in SQLite's busy handler
    while the first runs its next statement and commits (one shared thread would wait out the busy
    timeout, 30 s, and fail with `database is locked`)."""
    holding = asyncio.Event()

    async def first() -> None:
        async with engine.begin() as conn:
            await conn.execute(text("INSERT INTO t VALUES (1)"))
            holding.set()
            await asyncio.sleep(0.3)                   # the second writer is in BEGIN IMMEDIATE now
            await conn.execute(text("INSERT INTO t VALUES (2)"))

    async def second() -> None:
        await holding.wait()
        async with engine.begin() as conn:
            await conn.execute(text("INSERT INTO t VALUES (3)"))

    async with asyncio.timeout(10):
        await asyncio.gather(first(), second())
    assert await rows(engine) == [1, 2, 3]
    await engine.dispose()


@pytest.mark.parametrize("url", ["postgresql://u@h/d", "postgres://u@h/d", "postgresql+asyncpg://u@h/d",
                                 " postgres://u@h/d", "sqlite:///x.db", "sqlite+pysqlite:///x.db"])
def test_is_postgres_reads_the_scheme_as_normalise_url_does(url: str) -> None:
    assert is_postgres(url) == (normalise_url(url).get_backend_name() == "postgresql")
