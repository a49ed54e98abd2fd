"""POST /api/v1/trace on a real server: the reflector traces back toward the requester only, with
netprobe's own engine, and answers in `probe mtr --json`'s layout; tokens, limits and bad bodies."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator

import httpx
import pytest

from netprobe.config.secrets import hash_token
from netprobe.farend.server import make_app, start
from netprobe.probes.rmtr.trace import TraceLimits, TraceService

TOKEN = "reflector-token-of-sh-ct-1"


@pytest.fixture
async def service() -> TraceService:
    return TraceService({hash_token(TOKEN): "sh-ct-1"}, TraceLimits(min_interval_s=30.0, max_cycles=5))


@pytest.fixture
async def client(service: TraceService) -> AsyncIterator[httpx.AsyncClient]:
    runner = await start(make_app(trace=service), "127.0.0.1", 0, grace=0.5)
    port = runner.addresses[0][1]
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as c:
        yield c
    await runner.cleanup()


def auth(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_traces_back_to_the_requester_in_mtr_json_layout(client: httpx.AsyncClient,
                                                                service: TraceService) -> None:
    r = await client.post("/api/v1/trace", json={"cycles": 2, "interval": 0.1}, headers=auth())
    assert r.status_code == 200, r.text
    got = r.json()
    local = subprocess.run([sys.executable, "-m", "netprobe.cli", "probe", "mtr", "-c", "2", "-i", "0.1",
                            "--json", "127.0.0.1"], capture_output=True, text=True, timeout=60)
    want = json.loads(local.stdout)
    assert set(got) == set(want) and got["status"] == "ok" == want["status"]
    assert got["address"] == "127.0.0.1" and got["reached"] is True
    assert set(got["report"]) == set(want["report"]) and got["report"]["mtr"]["dst"] == "127.0.0.1"
    assert service.traces == 1 and not service.busy


async def test_one_at_a_time_and_a_minimum_interval(client: httpx.AsyncClient) -> None:
    first = asyncio.ensure_future(client.post("/api/v1/trace", json={"cycles": 3, "interval": 0.2},
                                              headers=auth()))
    await asyncio.sleep(0.2)
    busy = await client.post("/api/v1/trace", json={"cycles": 1}, headers=auth())
    assert busy.status_code == 429 and busy.headers["Retry-After"].isdigit()
    assert (await first).status_code == 200
    soon = await client.post("/api/v1/trace", json={"cycles": 1}, headers=auth())
    assert soon.status_code == 429 and 25 <= int(soon.headers["Retry-After"]) <= 30, soon.text


@pytest.mark.parametrize("token", [None, "wrong", "reflector-token-of-sh-ct-1x"])
async def test_a_bad_token_is_401(client: httpx.AsyncClient, token: str | None) -> None:
    r = await client.post("/api/v1/trace", json={}, headers={} if token is None else auth(token))
    assert r.status_code == 401 and "Bearer" in r.headers["WWW-Authenticate"]


@pytest.mark.parametrize(("body", "needle"), [
    ({"host": "198.18.0.1"}, "unknown key 'host'"),          # it never traces another address
    ({"cycles": True}, "cycles: expected int"),
    ({"cycles": 0}, "cycles: 1..5"),
    ({"cycles": 6}, "cycles: 1..5"),
    ({"mode": "raw"}, "mode"),
    ({"interval": 0.01}, "interval"),
    ([1, 2], "JSON object"),
])
async def test_bad_bodies_are_400(client: httpx.AsyncClient, body: object, needle: str) -> None:
    r = await client.post("/api/v1/trace", json=body, headers=auth())
    assert r.status_code == 400 and needle in r.json()["error"], r.text


async def test_not_json_and_too_big(client: httpx.AsyncClient) -> None:
    r = await client.post("/api/v1/trace", content=b"{nope", headers=auth())
    assert r.status_code == 400
    r = await client.post("/api/v1/trace", content=b" " * 5000, headers=auth())
    assert r.status_code == 413


async def test_no_tokens_no_endpoint() -> None:
    runner = await start(make_app(), "127.0.0.1", 0, grace=0.5)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{runner.addresses[0][1]}") as c:
            assert (await c.post("/api/v1/trace", json={}, headers=auth())).status_code == 404
    finally:
        await runner.cleanup()
