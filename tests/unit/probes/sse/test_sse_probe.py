"""The sse probe through real sockets: well-behaved and hostile servers on loopback, a third-party SSE
server (sse-starlette on uvicorn), and the command line."""

from __future__ import annotations

import asyncio
import itertools
import json
import resource
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from netprobe.net.resolve import Resolver
from netprobe.probes.base import ProbeContext, ProbeTarget
from netprobe.probes.sse.parser import SseEvent
from netprobe.probes.sse.runtime import SseResult, SseSettings
from netprobe.probes.sse.runtime import run as sse_run
from tests.support.farend import target_served

Handler = Callable[[web.Request], Any]


async def _sse_response(request: web.Request, **headers: str) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                       **headers})
    await resp.prepare(request)
    return resp


async def emitter(request: web.Request) -> web.StreamResponse:
    q = request.query
    count, interval = int(q.get("count", "10")), int(q.get("interval_ms", "20")) / 1000
    pause_at, pause = int(q.get("pause_at", "-1")), int(q.get("pause_ms", "0")) / 1000
    resp = await _sse_response(request)
    start = time.monotonic()
    for i in range(count):
        extra = pause if 0 <= pause_at <= i else 0.0
        await asyncio.sleep(max(0.0, start + i * interval + extra - time.monotonic()))
        await resp.write(f"id: {i}\ndata: {json.dumps({'seq': i, 'ts': time.time()})}\n\n".encode())
    return resp


async def openai(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    assert body["stream"] is True and body["messages"]
    resp = await _sse_response(request)

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        obj = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": body["model"],
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
        return f"data: {json.dumps(obj)}\n\n".encode()

    await resp.write(chunk({"role": "assistant", "content": ""}))
    await asyncio.sleep(0.05)
    await resp.write(b": keep-alive\n\n")
    for i in range(3):
        await asyncio.sleep(0.01)
        await resp.write(chunk({"reasoning_content": f"think{i} "}))
    for i in range(5):
        await asyncio.sleep(0.02)
        await resp.write(chunk({"content": f"tok{i} "}))
    await resp.write(chunk({}, "stop"))
    usage = {"prompt_tokens": 7, "completion_tokens": 8, "total_tokens": 15}
    await resp.write(f"data: {json.dumps({'id': 'c1', 'choices': [], 'usage': usage})}\n\n".encode())
    await resp.write(b"data: [DONE]\n\n")
    return resp


async def html(request: web.Request) -> web.Response:
    return web.Response(text="<html>nginx error page</html>", content_type="text/html")


async def broken(request: web.Request) -> web.Response:
    return web.Response(status=502, text="bad gateway")


async def trickle(request: web.Request) -> web.StreamResponse:
    resp = await _sse_response(request)
    for byte in b"data: " + b"x" * 10_000:
        await resp.write(bytes([byte]))
        await asyncio.sleep(1.0)
    return resp


async def huge(request: web.Request) -> web.StreamResponse:
    resp = await _sse_response(request)
    block = b"x" * (1 << 20)
    await resp.write(b"data: ")
    for _ in range(60):  # one 60 MB event
        await resp.write(block)
    await resp.write(b"\n\n")
    return resp


async def endless(request: web.Request) -> web.StreamResponse:
    resp = await _sse_response(request)
    i = 0
    while True:
        await resp.write(f"data: {json.dumps({'seq': i, 'ts': time.time()})}\n\n".encode())
        i += 1
        await asyncio.sleep(0.001)


async def cut(request: web.Request) -> web.StreamResponse:
    resp = await _sse_response(request)
    await resp.write(f"data: {json.dumps({'seq': 0, 'ts': time.time()})}\n\ndata: {{\"seq\": 1".encode())
    return resp  # the handler returns: the chunked body ends inside the second event


async def gzipped(request: web.Request) -> web.StreamResponse:
    resp = await _sse_response(request, **{"Content-Encoding": "gzip"})
    import gzip

    await resp.write(gzip.compress(f"data: {json.dumps({'seq': 0, 'ts': time.time()})}\n\n".encode()))
    return resp


@pytest.fixture
async def server() -> AsyncIterator[str]:
    app = web.Application()
    for path, handler in (("/sse", emitter), ("/v1/chat/completions", openai), ("/html", html),
                          ("/broken", broken), ("/trickle", trickle), ("/huge", huge), ("/endless", endless),
                          ("/cut", cut), ("/gzip", gzipped)):
        app.router.add_route("POST" if "chat" in path else "GET", path, handler)
    runner = web.AppRunner(app, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


async def probe(url: str, **settings: Any) -> SseResult:
    ctx = ProbeContext(resolver=Resolver())
    result = await sse_run(ProbeTarget(id="t", host="127.0.0.1", url=url), SseSettings(**settings), ctx)
    assert isinstance(result, SseResult)
    return result


async def test_emitter_stream_figures(server: str) -> None:
    r = await probe(f"{server}/sse?count=20&interval_ms=20")
    assert r.status == "ok" and r.completed and r.events == 20 and r.error_kind is None
    assert r.http_status == 200 and r.content_encoding is None and r.content_type == "text/event-stream"
    assert r.first_event_ms is not None and 0 < r.first_event_ms < 50
    assert r.gaps_ms is not None and 15 < r.gaps_ms["p50"] < 30 and r.stalls == 0
    assert r.delay_var_ms is not None and r.delay_var_ms["p95"] < 10
    assert r.ttfb_ms is not None and r.ttfb_ms <= r.first_event_ms
    assert r.connect_ms is not None and r.dns_ms is None  # an address literal: no lookup
    assert r.samples_ms == [r.first_event_ms] and r.sent == 1 and r.received == 1


async def test_one_pause_is_exactly_one_stall(server: str) -> None:
    r = await probe(f"{server}/sse?count=30&interval_ms=20&pause_at=15&pause_ms=400")
    assert r.stalls == 1 and 380 < r.stall_ms_total < 480 and r.gaps_ms is not None
    assert r.gaps_ms["max"] == pytest.approx(r.stall_ms_total)


async def test_openai_stream(server: str) -> None:
    r = await probe(f"{server}/v1/chat/completions", mode="openai", model="m1")
    assert r.status == "ok" and r.completed, r.error
    assert r.events == 8 and r.tokens == {"prompt_tokens": 7, "completion_tokens": 8, "total_tokens": 15}
    assert r.first_reasoning_ms is not None and r.first_content_ms is not None
    assert r.first_event_ms == r.first_reasoning_ms < r.first_content_ms
    assert r.first_reasoning_ms > 50  # the role chunk and the keep-alive comment did not count
    assert r.comments == 1 and r.tpot_ms is not None and 5 < r.tpot_ms < 40


@pytest.mark.parametrize(("path", "settings", "kind", "needle"), [
    ("/html", {}, "malformed", "text/html"),
    ("/broken", {}, "http_502", "502"),
    ("/trickle", {"idle_timeout": 0.5, "timeout": 5}, "stalled", "no data"),
    ("/trickle", {"idle_timeout": 3, "timeout": 1.5}, "timeout", "1.5"),
    ("/huge", {"timeout": 20}, "too_large", ""),
    ("/endless", {"timeout": 1.0}, "timeout", ""),
    ("/endless", {"timeout": 20, "max_total_bytes": 100_000}, "too_large", "100000"),
    ("/cut", {}, "truncated", ""),
])
async def test_hostile_and_broken_servers_end_in_classified_errors(
        server: str, path: str, settings: dict[str, Any], kind: str, needle: str) -> None:
    t0 = time.monotonic()
    r = await probe(f"{server}{path}", **settings)
    assert r.error_kind == kind and r.status == "down" and not r.completed, (r.error_kind, r.error)
    assert needle in (r.error or "")
    assert time.monotonic() - t0 < settings.get("timeout", 30) + 2


async def test_content_encoding_is_flagged(server: str) -> None:
    r = await probe(f"{server}/gzip")
    assert r.content_encoding == "gzip"


async def test_refused_port_is_a_connect_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = await probe(f"http://127.0.0.1:{port}/sse")
    assert r.error_kind == "connect" and r.status == "down"


def test_huge_event_memory_is_bounded() -> None:
    """A 60 MB single event against the default 1 MiB event cap: the probe's peak memory stays small."""
    code = (
        "import asyncio, resource\n"
        "from aiohttp import web\n"
        "import tests.unit.probes.sse.test_sse_probe as t\n"
        "async def main():\n"
        "    app = web.Application(); app.router.add_get('/huge', t.huge)\n"
        "    runner = web.AppRunner(app); await runner.setup()\n"
        "    site = web.TCPSite(runner, '127.0.0.1', 0); await site.start()\n"
        "    port = site._server.sockets[0].getsockname()[1]\n"
        "    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "    r = await t.probe(f'http://127.0.0.1:{port}/huge', timeout=20)\n"
        "    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "    print(r.error_kind, after - before)\n"
        "    await runner.cleanup()\n"
        "asyncio.run(main())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         cwd=Path(__file__).resolve().parents[4])
    kind, grown_kb = out.stdout.split()
    assert kind == "too_large" and int(grown_kb) < 40_000, out.stdout + out.stderr
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss > 0


# --- a third-party server: sse-starlette on uvicorn (CRLF separators, ping comments) ----------------

@pytest.fixture(scope="module")
def starlette_server() -> Iterator[str]:
    import uvicorn
    from sse_starlette.sse import EventSourceResponse, ServerSentEvent
    from starlette.applications import Starlette
    from starlette.routing import Route

    async def events(request: Any) -> EventSourceResponse:
        async def gen() -> AsyncIterator[ServerSentEvent]:
            for i in range(12):
                await asyncio.sleep(0.03)
                yield ServerSentEvent(data=json.dumps({"seq": i, "ts": time.time()}), id=str(i))
        return EventSourceResponse(gen(), ping=0.01)  # comments between events, CRLF line ends

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = uvicorn.Config(Starlette(routes=[Route("/events", events)]), host="127.0.0.1", port=port,
                            log_level="warning")
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    for _ in range(100):
        if srv.started:
            break
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/events"
    srv.should_exit = True
    thread.join(timeout=5)


async def test_third_party_server_sse_starlette(starlette_server: str) -> None:
    r = await probe(starlette_server)
    assert r.status == "ok" and r.completed and r.events == 12, r.error
    assert r.comments >= 1  # sse-starlette's pings: timestamped, never content
    assert r.gaps_ms is not None and 20 < r.gaps_ms["p50"] < 60 and r.stalls == 0


# --- command line ----------------------------------------------------------------------------------

def netprobe(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "netprobe.cli", *args], capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize(("args", "needle"), [
    (["ftp://127.0.0.1/x"], "not an http(s) URL"),
    (["http://127.0.0.1:1/", "--mode", "grpc"], "--mode"),
    (["http://127.0.0.1:1/", "--concurrency", "1,x"], "--concurrency"),
    (["http://127.0.0.1:1/", "--concurrency", "0"], "--concurrency"),
    (["http://127.0.0.1:1/v1/chat/completions", "--mode", "openai", "--api-key-file", "/nonexistent/key"],
     "/nonexistent/key"),
])
def test_bad_input_exit_2(args: list[str], needle: str) -> None:
    out = netprobe("probe", "sse", *args)
    assert out.returncode == 2 and needle in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_cli_json_and_sweep() -> None:
    async def serve_and_run() -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
        app = web.Application()
        app.router.add_get("/sse", emitter)
        app.router.add_post("/v1/chat/completions", openai)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        base = f"http://127.0.0.1:{port}"
        one = await asyncio.to_thread(netprobe, "probe", "sse", f"{base}/sse?count=5", "--json")
        sweep = await asyncio.to_thread(netprobe, "probe", "sse", f"{base}/v1/chat/completions", "--mode",
                                        "openai", "--concurrency", "1,4", "--json")
        await runner.cleanup()
        return one, sweep

    one, sweep = asyncio.run(serve_and_run())
    assert one.returncode == 0, one.stderr
    d = json.loads(one.stdout)
    assert d["probe"] == "sse" and d["events"] == 5 and set(d) >= {
        "dns_ms", "connect_ms", "tls_ms", "ttfb_ms", "first_event_ms", "gaps_ms", "events", "stalls",
        "stall_ms_total", "delay_var_ms", "tpot_ms", "reused_connection", "content_encoding", "completed",
        "error_kind"}
    assert sweep.returncode == 0, sweep.stderr
    levels = json.loads(sweep.stdout)["levels"]
    assert [lv["concurrency"] for lv in levels] == [1, 4] and all(lv["errors"] == 0 for lv in levels)
    assert all(set(lv["ttft_ms"]) == {"p50", "p95"} and set(lv["tpot_ms"]) == {"p50", "p95"} for lv in levels)


async def test_events_carry_kernel_arrival_times_not_the_loops(target_url: str) -> None:
    """`netprobe target` (another process) sends every 100 ms; the reader's loop is blocked from 70 to
    150 ms after the first event, so the second is read 50 ms late — yet keeps the time it arrived
    (the kernel's stamp), not the time the loop got round to reading it."""
    from netprobe.probes.sse.client import Limits, stream

    seen: list[SseEvent] = []

    def on_event(ev: SseEvent) -> bool:
        seen.append(ev)
        if len(seen) == 1:
            asyncio.get_running_loop().call_later(0.07, time.sleep, 0.08)  # a busy event loop
        return False

    cap = await stream("GET", f"{target_url}/sse?count=3&interval_ms=100", headers={}, body=None,
                       limits=Limits(), on_event=on_event, on_comment=lambda c: None)
    assert cap.completed and len(seen) == 3
    gaps = [(b.t_ns - a.t_ns) / 1e6 for a, b in itertools.pairwise(seen)]
    assert all(95 < g < 105 for g in gaps), gaps


@pytest.fixture(scope="module")
def target_url() -> Iterator[str]:
    with target_served() as url:
        yield url


async def test_against_netprobe_target_both_modes(target_url: str) -> None:
    r = await probe(f"{target_url}/sse?count=20&interval_ms=20&think_ms=50")
    assert r.status == "ok" and r.events == 20 and r.first_event_ms is not None and r.first_event_ms >= 50
    assert r.delay_var_ms is not None and r.delay_var_ms["p95"] < 5 and r.stalls == 0
    r = await probe(f"{target_url}/v1/chat/completions", mode="openai", max_tokens=8,
                    extra_body={"reasoning_tokens": 3, "interval_ms": 10, "think_ms": 30})
    assert r.status == "ok" and r.completed and r.events == 11, r.error
    assert r.first_reasoning_ms is not None and r.first_content_ms is not None
    assert r.first_reasoning_ms < r.first_content_ms and r.tokens and r.tokens.get("completion_tokens")


def test_kernel_stamps_fall_back_when_the_transport_is_not_asyncios() -> None:
    from netprobe.probes.sse.kstamps import KernelStamps

    assert KernelStamps.attach(object(), 0) is None


async def test_closed_before_any_answer_is_a_connect_error_and_garbage_is_malformed() -> None:
    async def close_at_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.close()

    async def not_http(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"SSH-2.0-OpenSSH_9.2\r\n\r\n")
        writer.close()

    for script, kind in ((close_at_once, "connect"), (not_http, "malformed")):
        server = await asyncio.start_server(script, "127.0.0.1", 0)
        async with server:
            port = server.sockets[0].getsockname()[1]
            r = await probe(f"http://127.0.0.1:{port}/sse")
        assert (r.status, r.error_kind) == ("down", kind), r.error
