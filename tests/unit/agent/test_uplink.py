"""The durable uplink against a scripted HTTP collector (real sockets, real SQLite outbox).

The scripted server answers each POST as a test tells it (200, 503, 401, 400, 413) and records what
it received; the end-to-end tests with the real collector and PostgreSQL are in test_uplink_e2e.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from netprobe.agent.uplink import Uplink, read_token
from netprobe.config.sections import UplinkConfig
from netprobe.errors import SetupError
from netprobe.store import Envelope, Store, open_store
from tests.support.store import count_results, icmp_envelope, typed

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
Answer = Callable[[list[dict[str, Any]]], tuple[int, dict[str, Any]]]


class Collector:
    """Records every decoded batch; `answer` decides the status (default: accept everything once)."""

    def __init__(self) -> None:
        self.batches: list[list[dict[str, Any]]] = []
        self.stored: set[str] = set()
        self.headers: list[dict[str, str]] = []
        self.answer: Answer = self.accept
        self.url = ""

    def accept(self, batch: list[dict[str, Any]]) -> tuple[int, dict[str, Any]]:
        new = {e["id"] for e in batch} - self.stored
        self.stored |= new
        return 200, {"accepted": len(new), "duplicates": len(batch) - len(new)}

    async def handle(self, request: web.Request) -> web.Response:
        batch = json.loads(await request.read())  # aiohttp inflates a gzip body itself
        self.batches.append(batch)
        self.headers.append(dict(request.headers))
        status, body = self.answer(batch)
        return web.json_response(body, status=status)


@pytest.fixture
async def collector(unused_tcp_port: int) -> AsyncIterator[Collector]:
    c = Collector()
    app = web.Application(client_max_size=64 << 20)
    app.router.add_post("/api/v1/results", c.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", unused_tcp_port).start()
    c.url = f"http://127.0.0.1:{unused_tcp_port}"
    yield c
    await runner.cleanup()


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    s = await open_store(f"sqlite:///{tmp_path}/agent.db")
    yield s
    await s.close()


def rounds(n: int, start: int = 0) -> list[Envelope]:
    return typed(icmp_envelope(T0 + timedelta(minutes=i), [10.0 + i % 3, 11.0], result_id=f"r{i:05d}")
                 for i in range(start, start + n))


def cfg(url: str, **kw: Any) -> UplinkConfig:
    return UplinkConfig(url=url, token="s3cret", **{"retry_max": 0.2, "timeout": 5.0, **kw})


async def stored(uplink: Uplink, store: Store, envs: list[Envelope]) -> None:
    stats = await store.write(envs, outbox_cap=uplink.cap)
    uplink.stored(stats.accepted, stats.outbox_dropped)


@contextlib.asynccontextmanager
async def running(store: Store, config: UplinkConfig, token: str = "s3cret",
                  final: float = 1.0) -> AsyncIterator[Uplink]:
    """A started uplink, closed (with a final attempt of `final` s) on the way out."""
    uplink = Uplink(store, config, token)
    await uplink.start()
    try:
        yield uplink
    finally:
        await uplink.close(final)


async def until(cond: Callable[[], bool], timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not cond():  # noqa: ASYNC110 - polls the uplink's counters, which signal nothing
            await asyncio.sleep(0.02)


async def test_outbox_fills_in_the_store_transaction_and_keeps_its_cap(store: Store) -> None:
    first = await store.write(rounds(5), outbox_cap=3)
    assert (first.accepted, first.outbox_dropped) == (5, 2)
    assert [e.result_id for e in await store.outbox_oldest(10, T0 + timedelta(days=30))] == \
        ["r00002", "r00003", "r00004"]
    again = await store.write(rounds(6), outbox_cap=3)  # five replays and one new round
    assert (again.accepted, again.duplicates, again.outbox_dropped) == (1, 5, 1)
    assert await store.outbox_depth() == 3
    assert await count_results(store) == 6  # the cap bounds the outbox, never the local store
    plain = await store.write(rounds(2, start=10))
    assert plain.accepted == 2 and await store.outbox_depth() == 3  # no uplink, no outbox


async def test_uploads_gzip_batches_with_the_token_and_empties_the_outbox(store: Store,
                                                                         collector: Collector) -> None:
    async with running(store, cfg(collector.url, batch=40)) as uplink:
        await stored(uplink, store, rounds(100))
        await until(lambda: uplink.stats.depth == 0)
    assert await store.outbox_depth() == 0
    assert len(collector.stored) == 100 and uplink.stats.sent == 100
    assert [len(b) for b in collector.batches] == [40, 40, 20]
    sent = [e["id"] for b in collector.batches for e in b]
    assert sent == [f"r{i:05d}" for i in range(100)]  # oldest first
    h = collector.headers[0]
    assert h["Authorization"] == "Bearer s3cret" and h["Content-Encoding"] == "gzip"


async def test_an_outage_backs_off_and_loses_nothing(store: Store, collector: Collector) -> None:
    statuses = iter([503, 502, 500])

    def flaky(batch: list[dict[str, Any]]) -> tuple[int, dict[str, Any]]:
        status = next(statuses, 200)
        return (status, {"error": "down"}) if status != 200 else collector.accept(batch)

    collector.answer = flaky
    async with running(store, cfg(collector.url)) as uplink:
        await stored(uplink, store, rounds(30))
        await until(lambda: uplink.stats.depth == 0)
    assert len(collector.stored) == 30
    assert uplink.stats.failures == {"http_503": 1, "http_502": 1, "http_500": 1}


async def test_a_lost_answer_is_replayed_and_counted_as_duplicates(store: Store,
                                                                   collector: Collector) -> None:
    """The collector stores the batch but the agent never hears back (a 504 from a proxy, a cut link):
    the replay is acknowledged as duplicates and nothing is stored twice."""
    answers = iter(["stored-then-lost"])

    def lossy(batch: list[dict[str, Any]]) -> tuple[int, dict[str, Any]]:
        body = collector.accept(batch)
        return (504, {}) if next(answers, None) else body

    collector.answer = lossy
    async with running(store, cfg(collector.url)) as uplink:
        await stored(uplink, store, rounds(10))
        await until(lambda: uplink.stats.depth == 0)
    assert (uplink.stats.sent, uplink.stats.duplicates) == (0, 10)
    assert len(collector.stored) == 10


async def test_nobody_listening_keeps_everything_and_counts_connect_errors(store: Store,
                                                                          unused_tcp_port: int) -> None:
    async with running(store, cfg(f"http://127.0.0.1:{unused_tcp_port}"), final=0.5) as uplink:
        await stored(uplink, store, rounds(5))
        await until(lambda: uplink.stats.failures.get("connect", 0) >= 2)
    assert await store.outbox_depth() == 5 and uplink.stats.depth == 5


async def test_a_refused_token_is_retried_never_dropped(store: Store, collector: Collector) -> None:
    collector.answer = lambda batch: (401, {"error": "bad token"})
    async with running(store, cfg(collector.url), token="wrong", final=0.0) as uplink:
        await stored(uplink, store, rounds(5))
        await until(lambda: uplink.stats.failures.get("unauthorized", 0) >= 2)
    assert await store.outbox_depth() == 5


async def test_a_refused_round_is_isolated_and_parked_while_the_rest_go_through(store: Store,
                                                                               collector: Collector) -> None:
    def picky(batch: list[dict[str, Any]]) -> tuple[int, dict[str, Any]]:
        if any(e["id"] == "r00013" for e in batch):
            return 400, {"error": "envelope 0: result.status: bad"}
        return collector.accept(batch)

    collector.answer = picky
    async with running(store, cfg(collector.url), final=0.5) as uplink:
        await stored(uplink, store, rounds(40))
        await until(lambda: len(collector.stored) == 39 and uplink.stats.rejected == 1)
    assert "r00013" not in collector.stored
    # kept for a later attempt (a fixed collector), not due again for an hour
    assert await store.outbox_depth() == 1
    assert await store.outbox_oldest(10, datetime.now(UTC)) == []
    parked = await store.outbox_oldest(10, datetime.now(UTC) + timedelta(hours=2))
    assert [e.result_id for e in parked] == ["r00013"] and parked[0].attempts == 1


async def test_too_large_halves_the_batch(store: Store, collector: Collector) -> None:
    def capped(batch: list[dict[str, Any]]) -> tuple[int, dict[str, Any]]:
        return (413, {"error": "too large"}) if len(batch) > 60 else collector.accept(batch)

    collector.answer = capped
    async with running(store, cfg(collector.url, batch=500)) as uplink:
        await stored(uplink, store, rounds(300))
        await until(lambda: uplink.stats.depth == 0)
        before = len(collector.batches)
        await stored(uplink, store, rounds(100, start=300))
        await until(lambda: uplink.stats.depth == 0)
    assert len(collector.stored) == 400 and uplink.stats.rejected == 0
    assert max(len(b) for b in collector.batches[before:]) <= 60  # no more 413s: batches stay small


async def test_close_makes_one_bounded_final_attempt(store: Store, collector: Collector) -> None:
    uplink = Uplink(store, cfg(collector.url), "s3cret")
    await uplink.start()
    await store.write(rounds(20), outbox_cap=uplink.cap)  # stored but not announced: only close() sends
    uplink.stats.depth = 20
    await uplink.close(2.0)
    assert len(collector.stored) == 20 and await store.outbox_depth() == 0


async def test_token_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "uplink.token"
    f.write_text("from-file\n")
    assert read_token(UplinkConfig(url="http://c:8471", token_file=str(f))) == "from-file"
    monkeypatch.setenv("NP_UPLINK", "from-env")
    assert read_token(UplinkConfig(url="http://c:8471", token_env="NP_UPLINK")) == "from-env"
    with pytest.raises(SetupError, match=r"uplink.token_file .*missing"):
        read_token(UplinkConfig(url="http://c:8471", token_file=str(tmp_path / "missing")))
    f.write_text("")
    with pytest.raises(SetupError, match="empty"):
        read_token(UplinkConfig(url="http://c:8471", token_file=str(f)))


async def test_close_as_new_rounds_are_announced_does_not_hang(store: Store, collector: Collector) -> None:
    """SIGTERM lands just as the last flush wakes the uploader: asyncio.wait_for (3.11) swallowed
    that cancel and the agent never exited. Now the task ends and the final attempt sends the rest."""
    uplink = Uplink(store, cfg(collector.url), "s3cret")
    await uplink.start()
    await until(lambda: uplink._task is not None and not uplink._wake.is_set())  # idle, waiting
    stats = await store.write(rounds(3), outbox_cap=uplink.cap)
    uplink.stored(stats.accepted, 0)  # wakes the task: its wait is done, its resumption pending …
    async with asyncio.timeout(5):
        await uplink.close(1.0)  # … when the cancel arrives
    assert uplink._task is not None and uplink._task.done()
    assert len(collector.stored) == 3 and await store.outbox_depth() == 0
