"""The hourly upkeep the agent and the collector share: old raw rounds deleted, rollups folded, the
retention asked each pass (a reload applies), and a failed pass logged and retried."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from netprobe.store import Store, open_store
from netprobe.store.upkeep import upkeep_loop
from tests.support.store import count_results, icmp_envelope, typed

log = logging.getLogger("netprobe.test-upkeep")


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    s = await open_store(f"sqlite:///{tmp_path / 'u.db'}")
    yield s
    await s.close()


async def _until(check: object, timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():  # type: ignore[operator]
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.01)


async def test_a_pass_deletes_rounds_older_than_the_retention_asked_each_time(
        store: Store, caplog: pytest.LogCaptureFixture) -> None:
    now = datetime.now(UTC)
    await store.write(typed(icmp_envelope(now - timedelta(days=d, minutes=1), [20.0, 21.0])
                            for d in range(5)))
    retention = [10 * 86400.0]
    asked: list[float] = []

    def current() -> float:
        asked.append(retention[0])
        return retention[0]

    caplog.set_level(logging.INFO, logger=log.name)
    task = asyncio.create_task(upkeep_loop(store, current, log, every=0.05))
    try:
        await _until(lambda: len(asked) >= 1)
        assert await count_results(store) == 5            # nothing older than 10 days
        retention[0] = 2 * 86400.0                         # as a SIGHUP reload changes it
        await _until(lambda: any(r.getMessage() == "retention" for r in caplog.records))
        assert await count_results(store) == 2            # today's and yesterday's
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_a_failed_pass_is_logged_and_the_loop_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        calls = 0

        async def enforce_retention(self, raw_days: float) -> int:
            self.calls += 1
            raise OSError("disk I/O error")

    broken = Broken()
    caplog.set_level(logging.ERROR, logger=log.name)
    task = asyncio.create_task(upkeep_loop(broken, lambda: 86400.0, log, every=0.01))  # type: ignore[arg-type]
    try:
        await _until(lambda: broken.calls >= 3)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    failed = [r for r in caplog.records if r.getMessage() == "retention failed"]
    assert len(failed) >= 2
