"""The collector served for real on 127.0.0.1 (in-process, ephemeral port), read with aiohttp's client,
over a real database: SQLite, and the PostgreSQL server at 127.0.0.1:5432 (a scratch database per test)."""

from __future__ import annotations

import asyncio
import gzip
import json
import shutil
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from netprobe.collector.app import Ingest, make_app
from netprobe.collector.metrics import CollectorMetrics, round_rtt_ms
from netprobe.collector.server import Collector
from netprobe.collector.tokens import Tokens, hash_token
from netprobe.config.collector import CollectorConfig, parse_collector_config
from netprobe.store import Store, open_store
from tests.support.pg import scratch_database
from tests.support.store import connection, count_results, hourly, icmp_envelope

T0 = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=2)
AGENT = "sh-ct-1"
MB = 1 << 20


def config(url: str, extra: str = "") -> CollectorConfig:
    return parse_collector_config(f'[collector]\nlisten = "127.0.0.1:0"\ngrace = "3s"\n{extra}\n'
                                  f'[storage]\nurl = "{url}"\n')


def batch(n: int, start: int = 0, agent: str = AGENT) -> list[dict[str, Any]]:
    return [icmp_envelope(T0 + timedelta(seconds=30 * i), [20.0 + i % 5, 21.0, None], agent=agent,
                          result_id=f"{agent}-r{i:06d}") for i in range(start, start + n)]


@dataclass
class Served:
    collector: Collector
    token: str
    session: aiohttp.ClientSession

    @property
    def store(self) -> Store:
        assert self.collector.store is not None
        return self.collector.store

    @property
    def url(self) -> str:
        return f"{self.collector.url}/api/v1/results"

    async def post(self, body: Any, token: str | None = "", *, raw: bytes | None = None,
                   headers: dict[str, str] | None = None) -> tuple[int, Any, aiohttp.ClientResponse]:
        h = {"Content-Type": "application/json", **(headers or {})}
        token = self.token if token == "" else token
        if token is not None:
            h["Authorization"] = f"Bearer {token}"
        data = raw if raw is not None else json.dumps(body).encode()
        async with self.session.post(self.url, data=data, headers=h) as resp:
            return resp.status, await resp.json(), resp

    async def metrics(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        async with self.session.get(f"{self.collector.url}/metrics") as resp:
            assert resp.status == 200
            text = await resp.text()
        return {(s.name, tuple(sorted(s.labels.items()))): s.value
                for fam in text_string_to_metric_families(text) for s in fam.samples}


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/collector.db"


@pytest.fixture
def pg_url() -> Iterator[str]:
    with scratch_database() as url:
        yield url


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/collector.db"
    else:
        with scratch_database() as url:
            yield url


async def serve(url: str, extra: str = "") -> AsyncIterator[Served]:
    collector = Collector(config(url, extra))
    await collector.start()
    try:
        assert collector.store is not None
        token, rotated = await Tokens(collector.store).issue(AGENT)
        assert not rotated
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
            yield Served(collector, token, session)
    finally:
        await collector.stop()


@pytest.fixture
async def served(db_url: str) -> AsyncIterator[Served]:
    async for s in serve(db_url):
        yield s


@pytest.fixture
async def lite(sqlite_url: str) -> AsyncIterator[Served]:
    """SQLite only: for what does not depend on the database."""
    async for s in serve(sqlite_url):
        yield s


@pytest.fixture
async def pg(pg_url: str) -> AsyncIterator[Served]:
    async for s in serve(pg_url):
        yield s


# --- ingest ---------------------------------------------------------------------------------------


async def test_a_batch_is_stored_and_a_replay_is_all_duplicates(served: Served) -> None:
    envs = batch(50)
    status, body, _ = await served.post(envs)
    assert (status, body) == (200, {"accepted": 50, "duplicates": 0, "expired": 0})
    assert await count_results(served.store, AGENT) == 50
    stored = [r.envelope.raw for r in await served.store.results(AGENT)]
    assert [e["id"] for e in stored] == [e["id"] for e in envs] and stored[0] == envs[0]
    status, body, _ = await served.post(envs + batch(5, start=50))
    assert (status, body) == (200, {"accepted": 5, "duplicates": 50, "expired": 0})
    assert await count_results(served.store) == 55
    status, body, _ = await served.post([])
    assert (status, body) == (200, {"accepted": 0, "duplicates": 0, "expired": 0})


async def test_gzip_body_is_accepted(served: Served) -> None:
    envs = batch(200)
    raw = gzip.compress(json.dumps(envs).encode())
    status, body, _ = await served.post(None, raw=raw, headers={"Content-Encoding": "gzip"})
    assert (status, body["accepted"]) == (200, 200)
    assert await count_results(served.store) == 200


@pytest.mark.parametrize("token", [None, "not-a-token", ""], ids=["missing", "bad", "empty-bearer"])
async def test_missing_or_bad_token_is_401_and_nothing_is_stored(served: Served, token: str | None) -> None:
    headers = {"Authorization": "Bearer "} if token == "" else None
    status, body, resp = await served.post(batch(3), token=None if token == "" else token, headers=headers)
    assert status == 401 and "token" in body["error"]
    assert resp.headers["WWW-Authenticate"].startswith("Bearer")
    assert await count_results(served.store) == 0


async def test_revoked_and_rotated_tokens_are_refused(served: Served) -> None:
    tokens = Tokens(served.store)
    assert (await served.post(batch(1)))[0] == 200
    new, rotated = await tokens.issue(AGENT)
    assert rotated and new != served.token
    status, _, resp = await served.post(batch(2, start=1))                 # the old token
    assert status == 401 and 'error="invalid_token"' in resp.headers["WWW-Authenticate"]
    assert (await served.post(batch(2, start=1), token=new))[0] == 200
    record, was_live = await tokens.revoke(AGENT)
    assert was_live and record.revoked_at is not None
    assert (await served.post(batch(2, start=3), token=new))[0] == 401
    assert await count_results(served.store) == 3
    listed = await tokens.list()
    assert [a.agent_id for a in listed] == [AGENT] and listed[0].last_used_at is not None
    assert "token" not in json.dumps([a.to_dict() for a in listed]).replace("token_", "")


async def test_tokens_are_stored_hashed(served: Served, db_url: str) -> None:
    async with connection(db_url) as conn:
        rows = (await conn.exec_driver_sql("SELECT agent_id, token_hash FROM agent_tokens")).all()
    assert rows == [(AGENT, hash_token(served.token))] and served.token not in str(rows)
    assert len(served.token) >= 43


@pytest.mark.parametrize(("raw", "needle"), [
    (b'[{"id": "x",', "malformed JSON"),
    (b'{"id": "x"}', "JSON array"),
    (b'"hello"', "JSON array"),
    (b"[NaN]", "NaN"),
    (b"\xff\xfe[", "malformed JSON"),
], ids=["truncated", "object", "string", "nan", "not-utf8"])
async def test_malformed_body_is_400(served: Served, raw: bytes, needle: str) -> None:
    status, body, _ = await served.post(None, raw=raw)
    assert status == 400 and needle in body["error"]
    assert await count_results(served.store) == 0


async def test_invalid_envelope_is_400_naming_index_and_field_and_nothing_is_stored(served: Served) -> None:
    envs = batch(5)
    del envs[3]["result"]["status"]
    status, body, _ = await served.post(envs)
    assert status == 400 and "envelope 3" in body["error"] and "result.status" in body["error"]
    envs = batch(5)
    del envs[2]["started_at"]
    status, body, _ = await served.post(envs)
    assert status == 400 and "envelope 2: started_at" in body["error"]
    assert await count_results(served.store) == 0


async def test_another_agents_round_is_403_naming_the_envelope(served: Served) -> None:
    envs = batch(4) + batch(1, agent="bj-cu-1")
    status, body, _ = await served.post(envs)
    assert status == 403 and "envelope 4" in body["error"] and "bj-cu-1" in body["error"]
    assert await count_results(served.store) == 0


async def test_nul_in_a_string_is_400_not_a_storage_error(served: Served) -> None:
    envs = batch(2)
    envs[1]["result"]["error"] = "bad\x00byte"
    status, body, _ = await served.post(envs)
    assert status == 400 and "\\u0000" in body["error"]


async def test_unsupported_or_broken_encoding(lite: Served) -> None:
    status, body, _ = await lite.post(batch(1), headers={"Content-Encoding": "br"})
    assert status == 415 and "br" in body["error"]
    status, body, _ = await lite.post(None, raw=b"not gzip at all", headers={"Content-Encoding": "gzip"})
    assert status == 400 and "gzip" in body["error"]
    truncated = gzip.compress(json.dumps(batch(20)).encode())[:-30]
    status, body, _ = await lite.post(None, raw=truncated, headers={"Content-Encoding": "gzip"})
    assert status == 400 and "gzip" in body["error"]
    assert await count_results(lite.store) == 0


# --- size caps ------------------------------------------------------------------------------------


async def test_40_mb_body_with_content_length_is_413(lite: Served) -> None:
    raw = b"[" + b" " * (40 * MB) + b"]"
    status, body, _ = await lite.post(None, raw=raw)
    assert status == 413 and "16 MiB" in body["error"]
    assert await count_results(lite.store) == 0


async def test_chunked_body_over_the_cap_is_413(lite: Served) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b"["
        for _ in range(20):
            yield b" " * MB
        yield b"]"

    headers = {"Authorization": f"Bearer {lite.token}", "Content-Type": "application/json"}
    async with lite.session.post(lite.url, data=chunks(), headers=headers) as resp:
        assert resp.request_info.headers.get("Transfer-Encoding") == "chunked"
        assert resp.status == 413


async def test_gzip_bomb_is_413(lite: Served) -> None:
    envs = batch(1)
    envs[0]["result"]["pad"] = "x" * (40 * MB)   # valid JSON that inflates to 40 MB
    raw = gzip.compress(json.dumps(envs).encode(), compresslevel=9)
    assert len(raw) < MB
    status, body, _ = await lite.post(None, raw=raw, headers={"Content-Encoding": "gzip"})
    assert status == 413 and "decompression" in body["error"]
    assert await count_results(lite.store) == 0


async def test_too_many_envelopes_is_413(sqlite_url: str) -> None:
    async for s in serve(sqlite_url, "max_batch = 10\nmax_body_mb = 1"):
        status, body, _ = await s.post(batch(11))
        assert status == 413 and "max_batch" in body["error"]
        assert (await s.post(batch(10)))[0] == 200
        status, _, _ = await s.post(None, raw=b"[" + b" " * (MB + 1) + b"]")
        assert status == 413


# --- PostgreSQL: concurrency, refused values, an unreachable database ----------------------------


@pytest.mark.postgres
async def test_concurrent_replays_of_one_batch_store_it_once(pg: Served) -> None:
    envs = batch(300)
    results = await asyncio.gather(*(pg.post(envs) for _ in range(8)))
    assert [r[0] for r in results] == [200] * 8
    assert sum(r[1]["accepted"] for r in results) == 300
    assert sum(r[1]["duplicates"] for r in results) == 7 * 300
    assert await count_results(pg.store) == 300
    rows = await hourly(pg.store, AGENT, None, "icmp", T0 - timedelta(hours=1), T0 + timedelta(hours=4))
    assert sum(r.rounds for r in rows) == 300


@pytest.mark.postgres
async def test_concurrent_gzip_batches_from_two_collectors(pg_url: str) -> None:
    """Two collectors on one database (behind a load balancer), overlapping batches at once."""
    a, b = Collector(config(pg_url)), Collector(config(pg_url))
    await a.start()
    await b.start()
    try:
        assert a.store is not None
        token, _ = await Tokens(a.store).issue(AGENT)
        envs = batch(400)
        parts = [envs[i:i + 100] for i in range(0, 400, 50)]    # each round in two batches
        async with aiohttp.ClientSession() as session:
            async def send(c: Collector, part: list[dict[str, Any]]) -> dict[str, int]:
                data = gzip.compress(json.dumps(part).encode())
                async with session.post(f"{c.url}/api/v1/results", data=data, headers={
                        "Authorization": f"Bearer {token}", "Content-Encoding": "gzip"}) as resp:
                    assert resp.status == 200
                    out: dict[str, int] = await resp.json()
                    return out
            got = await asyncio.gather(*(send(a if i % 2 else b, p) for i, p in enumerate(parts)))
        assert sum(g["accepted"] for g in got) == 400
        assert await count_results(a.store) == 400
    finally:
        await a.stop()
        await b.stop()


@pytest.mark.postgres
async def test_value_the_database_refuses_is_400_not_503(pg: Served) -> None:
    envs = batch(2)
    envs[1]["agent"]["region"] = "r" * 300       # longer than agents.region (128)
    status, body, _ = await pg.post(envs)
    assert status == 400 and "refused" in body["error"] and "postgres" not in body["error"]
    assert await count_results(pg.store) == 0


@pytest.mark.postgres
async def test_unreachable_database_is_503_on_ingest_and_healthz(closed_port: int) -> None:
    store = await open_store(f"postgresql+psycopg://postgres@127.0.0.1:{closed_port}/test", upgrade=False)
    metrics = CollectorMetrics()
    app = make_app(Ingest(store=store, tokens=Tokens(store), metrics=metrics, max_body=MB, max_batch=10))
    runner = aiohttp.web.AppRunner(app, access_log=None)
    await runner.setup()
    site = aiohttp.web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        async with aiohttp.ClientSession() as session:
            async with session.post(f"http://127.0.0.1:{port}/api/v1/results", json=batch(1),
                                    headers={"Authorization": "Bearer whatever"}) as resp:
                assert resp.status == 503 and resp.headers["Retry-After"]
                assert "retry" in (await resp.json())["error"]
            async with session.get(f"http://127.0.0.1:{port}/healthz") as resp:
                assert resp.status == 503 and (await resp.json())["status"] != "ok"
            async with session.get(f"http://127.0.0.1:{port}/metrics") as resp:
                text = await resp.text()
        rejected = {s.labels["reason"]: s.value for fam in text_string_to_metric_families(text)
                    for s in fam.samples if s.name == "netprobe_collector_rejected_requests_total"}
        assert rejected["storage"] == 1
    finally:
        await runner.cleanup()
        await store.close()


# --- healthz, metrics, shutdown -------------------------------------------------------------------


async def test_healthz(served: Served) -> None:
    async with served.session.get(f"{served.collector.url}/healthz") as resp:
        assert resp.status == 200 and await resp.json() == {"status": "ok"}


async def test_metrics_count_requests_results_and_rounds(lite: Served) -> None:
    envs = batch(10)
    # the last round lost half its echoes (an envelope's loss_pct must agree with its counts)
    envs[-1] = icmp_envelope(T0 + timedelta(seconds=30 * 9), [24.0, None], result_id=envs[-1]["id"])
    assert (await lite.post(envs))[0] == 200
    assert (await lite.post(envs))[0] == 200                      # all duplicates
    assert (await lite.post(batch(1), token="nope"))[0] == 401
    assert (await lite.post(None, raw=b"{"))[0] == 400
    assert (await lite.post(batch(1, agent="other")))[0] == 403
    m = await lite.metrics()
    c = "netprobe_collector_"
    assert m[(f"{c}ingest_requests_total", (("code", "200"),))] == 2
    assert m[(f"{c}ingest_requests_total", (("code", "401"),))] == 1
    assert m[(f"{c}results_accepted_total", (("agent", AGENT),))] == 10
    assert m[(f"{c}results_duplicate_total", (("agent", AGENT),))] == 10
    assert m[(f"{c}rejected_requests_total", (("reason", "unauthorized"),))] == 1
    assert m[(f"{c}rejected_requests_total", (("reason", "bad_json"),))] == 1
    assert m[(f"{c}rejected_requests_total", (("reason", "forbidden"),))] == 1
    assert m[(f"{c}rejected_requests_total", (("reason", "too_large"),))] == 0
    assert m[(f"{c}ingest_duration_seconds_count", ())] == 5
    key = (("agent", AGENT), ("probe", "icmp"), ("target", "hk-cn2"))
    last = envs[-1]["result"]
    assert m[(f"{c}last_loss_ratio", key)] == 0.5
    assert m[(f"{c}last_rtt_seconds", key)] == pytest.approx(last["rtt_ms"]["p50"] / 1000)
    assert m[(f"{c}last_round_timestamp_seconds", key)] == \
        datetime.fromisoformat(envs[-1]["started_at"].replace("Z", "+00:00")).timestamp()
    # an older round arriving late does not move the gauges back
    late = [icmp_envelope(T0 - timedelta(seconds=30 * 5), [None, None, None], result_id="late-r1")]
    assert (await lite.post(late))[0] == 200
    assert (await lite.metrics())[(f"{c}last_loss_ratio", key)] == 0.5


def test_round_rtt_of_each_probe() -> None:
    stats = {"p50": 12.0, "p95": 20.0}
    assert round_rtt_ms({"rtt_ms": stats}) == 12.0                       # icmp, mtr
    assert round_rtt_ms({"connect_ms": stats}) == 12.0                   # tcp
    assert round_rtt_ms({"connect_ms": 3.0, "first_event_ms": 85.5}) == 85.5   # sse
    assert round_rtt_ms({"rtt_ms": None, "loss_pct": 100.0}) is None


async def test_influx_outage_never_blocks_ingest_and_shows_in_metrics(sqlite_url: str,
                                                                      closed_port: int) -> None:
    extra = f'[influxdb]\nurl = "http://127.0.0.1:{closed_port}"\ntoken_env = "NETPROBE_TEST_INFLUX"\n'
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NETPROBE_TEST_INFLUX", "secret")
        cfg = parse_collector_config(f'[collector]\nlisten = "127.0.0.1:0"\n[storage]\nurl = "{sqlite_url}"\n'
                                     + extra)
        collector = Collector(cfg)
        await collector.start()
    try:
        assert collector.store is not None
        token, _ = await Tokens(collector.store).issue(AGENT)
        async with aiohttp.ClientSession() as session:
            async with asyncio.timeout(5):
                async with session.post(f"{collector.url}/api/v1/results", json=batch(20),
                                        headers={"Authorization": f"Bearer {token}"}) as resp:
                    assert resp.status == 200 and (await resp.json())["accepted"] == 20
            for _ in range(100):                       # the sink tries within its flush interval
                async with session.get(f"{collector.url}/metrics") as resp:
                    text = await resp.text()
                if 'netprobe_collector_sink_errors_total{sink="influxdb"} 0.0' not in text:
                    break
                await asyncio.sleep(0.05)
        assert 'netprobe_collector_sink_queue_depth{sink="influxdb"} 20.0' in text
        assert 'netprobe_collector_sink_errors_total{sink="influxdb"} 0.0' not in text
    finally:
        t0 = asyncio.get_running_loop().time()
        await collector.stop()
        assert asyncio.get_running_loop().time() - t0 < 5


@pytest.fixture
def vm(tmp_path: Path) -> Iterator[str]:
    """VictoriaMetrics on loopback: it speaks the InfluxDB v2 write API."""
    if shutil.which("victoria-metrics") is None:
        pytest.skip("victoria-metrics not installed (.ci/run installs it)")
    from tests.support.victoria import victoria_metrics

    with victoria_metrics(tmp_path / "vm") as url:
        yield url


async def test_accepted_rounds_reach_influxdb(sqlite_url: str, tmp_path: Path, vm: str) -> None:
    from tests.support.victoria import _export

    token_file = tmp_path / "influx.token"
    token_file.write_text("secret-token\n")
    extra = f'[influxdb]\nurl = "{vm}"\norg = "ops"\ntoken_file = "{token_file}"\n'
    collector = Collector(parse_collector_config(
        f'[collector]\nlisten = "127.0.0.1:0"\n[storage]\nurl = "{sqlite_url}"\n' + extra))
    await collector.start()
    try:
        assert collector.store is not None
        token, _ = await Tokens(collector.store).issue(AGENT)
        async with aiohttp.ClientSession() as session, session.post(
                f"{collector.url}/api/v1/results", json=batch(5),
                headers={"Authorization": f"Bearer {token}"}) as resp:
            assert resp.status == 200
    finally:
        await collector.stop()       # flushes the Influx queue
    series = await asyncio.to_thread(_export, vm, '{__name__=~"netprobe_icmp_loss_pct"}')
    assert series and series[0]["metric"]["agent"] == AGENT
    assert sum(len(s["values"]) for s in series) == 5


async def test_stop_finishes_a_request_in_flight(sqlite_url: str) -> None:
    collector = Collector(config(sqlite_url))
    await collector.start()
    assert collector.store is not None
    token, _ = await Tokens(collector.store).issue(AGENT)
    body = json.dumps(batch(30)).encode()
    first_sent = asyncio.Event()

    async def slow() -> AsyncIterator[bytes]:
        yield body[:100]
        first_sent.set()
        await asyncio.sleep(1.0)
        yield body[100:]

    async with aiohttp.ClientSession() as session:
        async def send() -> tuple[int, Any]:
            async with session.post(f"{collector.url}/api/v1/results", data=slow(),
                                    headers={"Authorization": f"Bearer {token}"}) as resp:
                return resp.status, await resp.json()

        request = asyncio.create_task(send())
        await first_sent.wait()
        await asyncio.sleep(0.2)
        stopping = asyncio.create_task(collector.stop())
        status, answer = await request
        await stopping
    assert status == 200 and answer["accepted"] == 30
    check = await open_store(sqlite_url)
    try:
        assert await count_results(check) == 30
    finally:
        await check.close()
