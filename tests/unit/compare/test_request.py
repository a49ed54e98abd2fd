"""One request against servers that misbehave in each way: every failure is a record of its kind."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from netprobe.compare.load import synthetic
from netprobe.compare.request import Endpoint, RequestRecord, send
from netprobe.compare.session import new_session
from netprobe.probes.sse.client import Limits

SEEN: list[dict[str, object]] = []


def chunk(delta: dict[str, object] | None = None, usage: dict[str, int] | None = None) -> bytes:
    body: dict[str, object] = {"object": "chat.completion.chunk",
                               "choices": [] if delta is None else [{"index": 0, "delta": delta}]}
    if usage is not None:
        body["usage"] = usage
    return b"data: " + json.dumps(body).encode() + b"\n\n"


async def _sse(request: web.Request, parts: list[bytes], pause: float = 0.01) -> web.StreamResponse:
    peer = request.transport.get_extra_info("peername") if request.transport is not None else None
    SEEN.append({"auth": request.headers.get("Authorization"), "body": await request.json(), "peer": peer})
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    for p in parts:
        await resp.write(p)
        await asyncio.sleep(pause)
    return resp


async def good(request: web.Request) -> web.StreamResponse:
    """Reasoning first (DeepSeek's reasoning_content), 3 tokens in 2 chunks, usage says 5."""
    return await _sse(request, [chunk({"role": "assistant", "content": ""}),
                                chunk({"reasoning_content": "hm"}), chunk({"content": "a b"}), chunk({}),
                                chunk(None, {"completion_tokens": 5}),
                                b"data: [DONE]\n\n"])


async def no_usage(request: web.Request) -> web.StreamResponse:
    return await _sse(request, [chunk({"content": "a"}), chunk({"content": "b"}), chunk({"content": "c"}),
                                b"data: [DONE]\n\n"])


async def cut(request: web.Request) -> web.StreamResponse:
    return await _sse(request, [chunk({"content": "a"})])


async def junk(request: web.Request) -> web.StreamResponse:
    return await _sse(request, [chunk({"content": "a"}), b"data: {not json\n\n"])


async def empty(request: web.Request) -> web.StreamResponse:
    return await _sse(request, [chunk({"role": "assistant"}), b"data: [DONE]\n\n"])


async def slow(request: web.Request) -> web.StreamResponse:
    return await _sse(request, [chunk({"content": "a"})] * 50, pause=0.1)


async def overloaded(request: web.Request) -> web.Response:
    return web.json_response({"error": {"message": "busy"}}, status=503)


async def html(request: web.Request) -> web.Response:
    return web.Response(text="<html>", content_type="text/html")


@pytest.fixture
async def base() -> AsyncIterator[str]:
    app = web.Application()
    for name, handler in (("good", good), ("no_usage", no_usage), ("cut", cut), ("junk", junk),
                          ("empty", empty), ("slow", slow), ("overloaded", overloaded), ("html", html)):
        app.router.add_post(f"/{name}/v1/chat/completions", handler)
    runner = web.AppRunner(app, shutdown_timeout=0.2)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]
    await runner.cleanup()


async def one(url: str, limits: Limits = Limits(total_s=5), **kw: object) -> RequestRecord:
    ep = Endpoint(url=url, post_url=f"{url}/v1/chat/completions", model="m",
                  headers={"Authorization": "Bearer sekrit"}, extra_body=dict(kw))
    async with new_session() as session:
        return await send(session, ep, synthetic(1, 4, 9)[0], limits)


async def test_a_good_stream(base: str) -> None:
    SEEN.clear()
    r = await one(f"{base}/good", ignore_eos=True)
    assert r.ok and r.error_kind is None and r.output_tokens == 5 and r.from_usage
    assert r.ttft_ms is not None and r.e2e_ms is not None and r.e2e_ms - r.ttft_ms >= 8  # reasoning counts
    assert len(r.itl_ms) == 1
    body = SEEN[0]["body"]
    assert isinstance(body, dict)
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 9 and body["model"] == "m" and body["ignore_eos"] is True
    assert SEEN[0]["auth"] == "Bearer sekrit"


async def test_a_completed_stream_leaves_its_connection_warm(base: str) -> None:
    """The body's end comes 10 ms after `data: [DONE]` here: read before the response is released,
    the next request goes on the same connection (no new handshake in its TTFT)."""
    SEEN.clear()
    ep = Endpoint(url=f"{base}/good", post_url=f"{base}/good/v1/chat/completions", model="m", headers={},
                  extra_body={})
    async with new_session() as session:
        records = [await send(session, ep, synthetic(1, 4, 9)[0], Limits(total_s=5)) for _ in range(3)]
    assert all(r.ok for r in records)
    assert len({str(seen["peer"]) for seen in SEEN}) == 1, SEEN


async def test_without_usage_tokens_are_counted_from_chunks(base: str) -> None:
    r = await one(f"{base}/no_usage")
    assert r.ok and r.output_tokens == 3 and not r.from_usage and len(r.itl_ms) == 2


@pytest.mark.parametrize(("path", "kind"), [
    ("cut", "incomplete"), ("junk", "malformed"), ("empty", "no_tokens"), ("overloaded", "http_503"),
    ("html", "malformed"),
])
async def test_broken_streams_are_errors_of_their_kind(base: str, path: str, kind: str) -> None:
    r = await one(f"{base}/{path}")
    assert not r.ok and r.error_kind == kind and r.error


async def test_timeout_and_connect(base: str, closed_port: int) -> None:
    r = await one(f"{base}/slow", Limits(total_s=0.3))
    assert r.error_kind == "timeout"
    r = await one(f"http://127.0.0.1:{closed_port}")
    assert r.error_kind == "connect"
