"""`netprobe target`: the SSE emitter, served for real on loopback and read by third-party clients.

Most tests run the app in-process (netprobe.farend.server.start on 127.0.0.1, ephemeral port) and
read it with httpx / httpx-sse / the official openai SDK; the CLI tests run it as a subprocess.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from httpx_sse import aconnect_sse, connect_sse

from netprobe.farend.server import make_app, start
from netprobe.probes.sse.params import Limits

KEY = "sk-test-0123456789"


@dataclass
class Served:
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture
async def server() -> AsyncIterator[Served]:
    runner = await start(make_app(api_key=KEY), "127.0.0.1", 0, grace=0.5)
    yield Served(runner.addresses[0][1])
    await runner.cleanup()


@pytest.fixture
async def client(server: Served) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as c:
        yield c


@pytest.fixture
async def ai(server: Served) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key=KEY, max_retries=0) as c:
        yield c


async def sse_events(client: httpx.AsyncClient, query: str) -> list[tuple[float, str, dict[str, Any]]]:
    """(arrival, id, data) of every event of GET /sse?query, read with httpx-sse."""
    out = []
    async with aconnect_sse(client, "GET", f"/sse?{query}") as source:
        source.response.raise_for_status()
        async for ev in source.aiter_sse():
            out.append((time.monotonic(), ev.id, json.loads(ev.data)))
    return out


# --- GET /sse ---------------------------------------------------------------------------------------


async def test_sse_headers(client: httpx.AsyncClient) -> None:
    # httpx asks for gzip/deflate/br; the emitter must still answer uncompressed, chunked.
    async with client.stream("GET", "/sse?count=1&interval_ms=1",
                             headers={"Accept-Encoding": "gzip, deflate, br"}) as resp:
        body = b"".join([chunk async for chunk in resp.aiter_raw()])
    assert resp.status_code == 200
    assert resp.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert resp.headers["cache-control"] == "no-cache"
    assert resp.headers["x-accel-buffering"] == "no"
    assert "content-encoding" not in resp.headers and "content-length" not in resp.headers
    assert resp.headers["transfer-encoding"] == "chunked"
    assert body.startswith(b"id: 0\ndata: {") and body.endswith(b"}\n\n")


async def test_sse_events_are_on_a_drift_free_schedule(client: httpx.AsyncClient) -> None:
    before = time.time()
    events = await sse_events(client, "count=50&interval_ms=20")
    assert [data["seq"] for _, _, data in events] == list(range(50))
    assert [ident for _, ident, _ in events] == [str(i) for i in range(50)]
    ts = [data["ts"] for _, _, data in events]
    assert before <= ts[0] <= time.time() and ts == sorted(ts)
    # Server side: event i leaves at start + i·20 ms, so lateness never accumulates (sleeping 20 ms
    # after each send would put event 49 ≥ 50 ms late). start is estimated robustly from all events.
    start = statistics.median(t - i * 0.020 for i, t in enumerate(ts))
    offsets = [t - start - i * 0.020 for i, t in enumerate(ts)]
    assert abs(offsets[-1]) < 0.008, offsets
    assert abs(statistics.median(offsets[-10:]) - statistics.median(offsets[:10])) < 0.003, offsets
    assert max(abs(o) for o in offsets) < 0.020, offsets
    # Client side: the same, as received (loopback adds next to nothing).
    arrivals = [a for a, _, _ in events]
    gaps = [b - a for a, b in pairwise(arrivals)]
    assert abs(statistics.median(gaps) - 0.020) < 0.003, gaps
    assert abs(arrivals[-1] - arrivals[0] - 49 * 0.020) < 0.015


@pytest.mark.parametrize("size", [0, 64, 500, 4096, 1 << 20])
async def test_sse_size_pads_the_data(client: httpx.AsyncClient, size: int) -> None:
    async with client.stream("GET", f"/sse?count=2&interval_ms=1&size={size}") as resp:
        body = (await resp.aread()).decode()
    lines = [line for line in body.split("\n") if line.startswith("data: ")]
    assert len(lines) == 2
    for seq, line in enumerate(lines):
        data = line.removeprefix("data: ")
        doc = json.loads(data)
        assert set(doc) == {"seq", "ts", "pad"} and doc["seq"] == seq
        assert set(doc["pad"]) <= {"x"}
        if size >= 64:
            assert len(data.encode()) == size
        else:
            assert doc["pad"] == ""  # smaller than the fields themselves: as small as it gets


async def test_sse_think_time_with_ping_comments(client: httpx.AsyncClient) -> None:
    marks: list[tuple[float, bytes]] = []
    async with client.stream("GET", "/sse?count=2&interval_ms=10&think_ms=300&ping_ms=100") as resp:
        t0 = time.monotonic()  # response headers are sent before thinking starts
        async for chunk in resp.aiter_raw():
            marks.append((time.monotonic() - t0, chunk))
    body = b"".join(c for _, c in marks)
    assert body.startswith(b": ping\n\n: ping\n\nid: 0\n")
    assert body.count(b": ping\n\n") == 2  # at 100 and 200 ms; the first event is due at 300
    first_event = next(t for t, c in marks if b"id: 0" in c)
    assert 0.28 <= first_event < 0.6
    ping_times = [t for t, c in marks if c.startswith(b": ping")]
    assert all(0.07 < t < 0.26 for t in ping_times), ping_times


async def test_sse_no_pings_unless_asked(client: httpx.AsyncClient) -> None:
    async with client.stream("GET", "/sse?count=1&think_ms=150") as resp:
        body = await resp.aread()
    assert body.startswith(b"id: 0\n") and b": ping" not in body


async def test_sse_pause_at_gives_exactly_one_long_gap(client: httpx.AsyncClient) -> None:
    events = await sse_events(client, "count=10&interval_ms=20&pause_at=5&pause_ms=200")
    ts = [data["ts"] for _, _, data in events]
    gaps = [b - a for a, b in pairwise(ts)]
    long_gaps = [i for i, g in enumerate(gaps) if g > 0.1]
    assert long_gaps == [4], gaps  # between event 4 and event 5
    assert abs(gaps[4] - 0.220) < 0.015
    assert all(abs(g - 0.020) < 0.015 for i, g in enumerate(gaps) if i != 4), gaps


@pytest.mark.parametrize(("query", "name", "bounds"), [
    ("count=abc", "count", "0..1000000"),
    ("count=-1", "count", "0..1000000"),
    ("count=1000001", "count", "0..1000000"),
    ("count=1.5", "count", "0..1000000"),
    ("count=", "count", "0..1000000"),
    ("interval_ms=0", "interval_ms", "1..60000"),
    ("interval_ms=60001", "interval_ms", "1..60000"),
    ("size=1048577", "size", "0..1048576"),
    ("size=99999999999999999999999999", "size", "0..1048576"),
    ("think_ms=300001", "think_ms", "0..300000"),
    ("pause_ms=-5&pause_at=1", "pause_ms", "0..300000"),
    ("count=10&pause_at=10&pause_ms=100", "pause_at", "0..9"),
    ("ping_ms=%20100", "ping_ms", "0..60000"),
])
async def test_sse_bad_parameters_are_400_naming_them(client: httpx.AsyncClient, query: str, name: str,
                                                      bounds: str) -> None:
    resp = await client.get(f"/sse?{query}")
    assert resp.status_code == 400
    assert resp.headers["content-type"].startswith("text/plain")
    text = resp.text
    assert text.count("\n") == 1 and text.endswith("\n"), text  # one line
    assert text.startswith(f"{name}: ") and bounds in text, text


async def test_sse_unknown_parameters_are_ignored(client: httpx.AsyncClient) -> None:
    events = await sse_events(client, "count=2&interval_ms=1&_=1700000000")  # a cache-buster
    assert len(events) == 2


async def test_client_leaving_mid_stream_does_not_hurt(client: httpx.AsyncClient,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    for query in ("count=1000&interval_ms=5", "count=1&think_ms=5000&ping_ms=50"):  # mid-stream, mid-think
        async with client.stream("GET", f"/sse?{query}") as resp:
            async for _ in resp.aiter_raw():
                break  # hang up after the first bytes
        async with client.stream("GET", f"/sse?{query}"):
            pass  # hang up right after the headers
    await asyncio.sleep(0.2)
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_healthz(client: httpx.AsyncClient) -> None:
    resp = await client.get("/healthz")
    assert resp.status_code == 200 and resp.json() == {"status": "ok"}


async def test_ipv6_listen() -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6")
    runner = await start(make_app(), "::1", 0, grace=0.5)
    try:
        async with httpx.AsyncClient(base_url=f"http://[::1]:{runner.addresses[0][1]}") as c:
            assert (await c.get("/healthz")).json() == {"status": "ok"}
    finally:
        await runner.cleanup()


# --- POST /v1/chat/completions through the official openai SDK ---------------------------------------


async def test_openai_stream_role_reasoning_content_usage(ai: openai.AsyncOpenAI) -> None:
    stream = await ai.chat.completions.create(
        model="deepseek-r1", messages=[{"role": "user", "content": "say five words"}], stream=True,
        stream_options={"include_usage": True}, max_tokens=5,
        extra_body={"reasoning_tokens": 3, "interval_ms": 5})
    chunks = [chunk async for chunk in stream]
    assert {c.object for c in chunks} == {"chat.completion.chunk"}
    assert len({c.id for c in chunks}) == 1 and chunks[0].id.startswith("chatcmpl-")
    assert {c.model for c in chunks} == {"deepseek-r1"}
    first = chunks[0].choices[0]
    assert first.delta.role == "assistant" and first.delta.content == "" and first.finish_reason is None
    with_choices = [c for c in chunks if c.choices]
    reasoning = "".join((c.choices[0].delta.model_extra or {}).get("reasoning_content") or ""
                        for c in with_choices)
    content = "".join(c.choices[0].delta.content or "" for c in with_choices)
    assert reasoning == "think1 think2 think3 "
    assert content == "tok1 tok2 tok3 tok4 tok5 "
    # order: role, 3 reasoning, 5 content, finish, usage
    assert len(chunks) == 1 + 3 + 5 + 1 + 1
    finish = chunks[-2].choices[0]
    assert finish.finish_reason == "stop" and finish.delta.content is None and finish.delta.role is None
    usage_chunk = chunks[-1]
    assert usage_chunk.choices == [] and usage_chunk.usage is not None
    assert usage_chunk.usage.prompt_tokens == 3
    assert usage_chunk.usage.completion_tokens == 8 and usage_chunk.usage.total_tokens == 11
    assert usage_chunk.usage.completion_tokens_details is not None
    assert usage_chunk.usage.completion_tokens_details.reasoning_tokens == 3
    assert all(c.usage is None for c in chunks[:-1])


async def test_openai_stream_without_usage(ai: openai.AsyncOpenAI) -> None:
    stream = await ai.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}],
                                              stream=True, max_tokens=2, extra_body={"interval_ms": 1})
    chunks = [chunk async for chunk in stream]
    assert all(c.choices for c in chunks) and chunks[-1].choices[0].finish_reason == "stop"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "tok1 tok2 "


async def test_openai_think_time_and_query_extras(ai: openai.AsyncOpenAI) -> None:
    t0 = time.monotonic()
    stream = await ai.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}], stream=True, max_tokens=3,
        extra_query={"think_ms": "300", "ping_ms": "50", "reasoning_tokens": "1"})
    arrivals, reasoning = [], ""
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            arrivals.append(time.monotonic() - t0)
        if chunk.choices:
            reasoning += (chunk.choices[0].delta.model_extra or {}).get("reasoning_content") or ""
    assert len(arrivals) == 3 and reasoning == "think1 "
    assert 0.29 <= arrivals[0] < 0.8  # think time before the first token, comments meanwhile


async def test_chat_keepalive_comments_raw(client: httpx.AsyncClient) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True,
            "max_tokens": 1, "think_ms": 250, "ping_ms": 100}
    async with client.stream("POST", "/v1/chat/completions", json=body,
                             headers={"Authorization": f"Bearer {KEY}"}) as resp:
        assert resp.headers["content-type"] == "text/event-stream; charset=utf-8"
        assert resp.headers["x-accel-buffering"] == "no" and "content-encoding" not in resp.headers
        text = (await resp.aread()).decode()
    assert text.startswith(": keep-alive\n\n: keep-alive\n\ndata: {")
    assert text.endswith("data: [DONE]\n\n")
    frames = [f for f in text.split("\n\n") if f.startswith("data: {")]
    for frame in frames:  # every chunk is one `data:` line of compact-enough JSON
        assert "\n" not in frame
        json.loads(frame.removeprefix("data: "))


async def test_openai_non_streaming(ai: openai.AsyncOpenAI) -> None:
    done = await ai.chat.completions.create(model="m", messages=[{"role": "user", "content": "a b c d"}],
                                            max_tokens=3, extra_body={"interval_ms": 1,
                                                                      "reasoning_tokens": 2})
    assert done.object == "chat.completion" and done.id.startswith("chatcmpl-")
    choice = done.choices[0]
    assert choice.finish_reason == "stop" and choice.message.role == "assistant"
    assert choice.message.content == "tok1 tok2 tok3 "
    assert (choice.message.model_extra or {}).get("reasoning_content") == "think1 think2 "
    assert done.usage is not None
    assert (done.usage.prompt_tokens, done.usage.completion_tokens, done.usage.total_tokens) == (4, 5, 9)


async def test_openai_wrong_key_is_401(server: Served) -> None:
    async with openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="sk-wrong", max_retries=0) as bad:
        with pytest.raises(openai.AuthenticationError) as info:
            await bad.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}],
                                              stream=True)
    assert info.value.status_code == 401 and info.value.code == "invalid_api_key"


async def test_missing_key_is_401_json(client: httpx.AsyncClient) -> None:
    resp = await client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "x"}]})
    assert resp.status_code == 401
    assert resp.json()["error"]["code"] == "invalid_api_key"


async def test_no_key_configured_means_open() -> None:
    runner = await start(make_app(), "127.0.0.1", 0, grace=0.5)
    try:
        url = f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
        async with openai.AsyncOpenAI(base_url=url, api_key="anything", max_retries=0) as c:
            done = await c.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}],
                                                   max_tokens=1, extra_body={"interval_ms": 1})
        assert done.choices[0].message.content == "tok1 "
    finally:
        await runner.cleanup()


async def test_openai_bad_request_names_the_parameter(ai: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        await ai.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}],
                                         max_tokens=0)
    assert info.value.status_code == 400 and info.value.param == "max_tokens"
    assert "max_tokens" in info.value.message and "1..100000" in info.value.message


@pytest.mark.parametrize(("body", "param"), [
    (b"{not json", "body"),
    (b"[1, 2]", "body"),
    (b'{"model": "m"}', "messages"),
    (b'{"model": "m", "messages": []}', "messages"),
    (b'{"model": "m", "messages": ["hi"]}', "messages"),
    (b'{"model": 5, "messages": [{"role": "user", "content": "x"}]}', "model"),
    (b'{"messages": [{"role": "user", "content": "x"}], "stream": "yes"}', "stream"),
    (b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": true}', "max_tokens"),
    (b'{"messages": [{"role": "user", "content": "x"}], "think_ms": 300001}', "think_ms"),
    (b'{"messages": [{"role": "user", "content": "x"}], "reasoning_tokens": -1}', "reasoning_tokens"),
    (b'{"messages": [{"role": "user", "content": "x"}], "stream_options": 3}', "stream_options"),
])
async def test_chat_malformed_requests_are_400(client: httpx.AsyncClient, body: bytes, param: str) -> None:
    resp = await client.post("/v1/chat/completions", content=body,
                             headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"})
    assert resp.status_code == 400, resp.text
    err = resp.json()["error"]
    assert err["type"] == "invalid_request_error" and err["param"] == param
    assert err["message"].startswith(f"{param}: ")


async def test_chat_body_over_the_cap_is_413() -> None:
    runner = await start(make_app(limits=Limits(max_body_bytes=1024)), "127.0.0.1", 0, grace=0.5)
    big = json.dumps({"messages": [{"role": "user", "content": "x" * 2000}]}).encode()

    async def chunked() -> AsyncIterator[bytes]:  # no Content-Length: the cap must hold while reading
        for i in range(0, len(big), 256):
            yield big[i:i + 256]

    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{runner.addresses[0][1]}") as c:
            for content in (big, chunked()):
                resp = await c.post("/v1/chat/completions", content=content)
                assert resp.status_code == 413, resp.text
                assert resp.json()["error"]["param"] == "body" and "1024" in resp.json()["error"]["message"]
    finally:
        await runner.cleanup()


# --- the real CLI ---------------------------------------------------------------------------------------


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "netprobe.cli", "target", *args]


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    path = tmp_path / "api.key"
    path.write_text(KEY + "\n", encoding="utf-8")
    return path


@pytest.fixture
def cli_target(key_file: Path) -> Iterator[tuple[subprocess.Popen[str], int]]:
    proc = subprocess.Popen(cli("--listen", "127.0.0.1:0", "--api-key-file", str(key_file), "--grace", "1"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    line = proc.stderr.readline()  # the first log line names the bound address
    m = re.search(r"url=http://127\.0\.0\.1:(\d+)", line)
    assert m, line + (proc.stderr.read() if proc.poll() is not None else "")
    yield proc, int(m.group(1))
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=10)


def test_cli_serves_httpx_sse_and_stops_on_sigterm(cli_target: tuple[subprocess.Popen[str], int]) -> None:
    proc, port = cli_target
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as c:
        assert c.get("/healthz").json() == {"status": "ok"}
        with connect_sse(c, "GET", "/sse?count=5&interval_ms=10&size=100") as source:
            assert source.response.headers["x-accel-buffering"] == "no"
            events = [(ev.id, json.loads(ev.data)) for ev in source.iter_sse()]
        assert [(i, d["seq"]) for i, d in events] == [(str(n), n) for n in range(5)]
        resp = c.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "x"}]},
                      headers={"Authorization": "Bearer nope"})
        assert resp.status_code == 401  # the key file was read
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0
    assert time.monotonic() - t0 < 5
    assert proc.stderr is not None and "target stopping" in proc.stderr.read()


def test_cli_sigterm_mid_stream_exits_0_within_grace(cli_target: tuple[subprocess.Popen[str], int]) -> None:
    proc, port = cli_target
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as c, \
            c.stream("GET", "/sse?count=100000&interval_ms=10") as resp:
        chunks = resp.iter_raw()
        assert next(chunks)  # the stream is running
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        with pytest.raises(httpx.HTTPError):  # cut after the 1 s grace, not completed
            for _ in chunks:
                pass
        assert proc.wait(timeout=10) == 0
        assert 0.5 < time.monotonic() - t0 < 5


def test_cli_sigint_exits_0(cli_target: tuple[subprocess.Popen[str], int]) -> None:
    proc, _ = cli_target
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=10) == 0


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cli(*args), capture_output=True, text=True, timeout=60,
                          env={**os.environ, "COLUMNS": "200"})


@pytest.mark.parametrize(("listen", "needle"), [
    ("nonsense", "missing port"),
    ("127.0.0.1", "missing port"),
    ("127.0.0.1:70000", "out of range"),
    ("127.0.0.1:http", "not a number"),
    ("300.1.1.1:8473", "not a valid IPv4 address"),
    ("::1:8473", "[ADDR]:PORT"),
])
def test_cli_bad_listen_exits_2(listen: str, needle: str) -> None:
    out = run_cli("--listen", listen)
    assert out.returncode == 2, out.stderr
    assert "--listen" in out.stderr and needle in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


def test_cli_unreadable_key_file_exits_2(tmp_path: Path) -> None:
    out = run_cli("--listen", "127.0.0.1:0", "--api-key-file", str(tmp_path / "missing.key"))
    assert out.returncode == 2 and "--api-key-file" in out.stderr and "cannot read" in out.stderr, out.stderr
    empty = tmp_path / "empty.key"
    empty.write_text("\n", encoding="utf-8")
    out = run_cli("--listen", "127.0.0.1:0", "--api-key-file", str(empty))
    assert out.returncode == 2 and "nothing" in out.stderr, out.stderr


def test_cli_port_in_use_exits_2(listener: int) -> None:
    out = run_cli("--listen", f"127.0.0.1:{listener}")
    assert out.returncode == 2, out.stderr
    assert f"cannot listen on http://127.0.0.1:{listener}" in out.stderr
    assert "in use" in out.stderr and "Traceback" not in out.stderr
