"""What both streaming endpoints share: headers, a per-app config key, and scheduled writes."""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass, field

from aiohttp import web

from netprobe.net.pacing import sleep_until
from netprobe.probes.sse.model import Server
from netprobe.probes.sse.params import Limits

# Content-Type with the charset spelled out; no-cache so no proxy stores a stream; X-Accel-Buffering
# tells nginx (and proxies that copy it) to pass each event on at once instead of buffering.
SSE_HEADERS = {
    "Content-Type": "text/event-stream; charset=utf-8",
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",
}


@dataclass(frozen=True)
class TargetConfig:
    api_key: str | None
    limits: Limits
    server: Server = field(default_factory=Server)     # openai mode's prefill, token pace and slots


CONFIG = web.AppKey("netprobe_target", TargetConfig)


def _nodelay(request: web.Request) -> None:
    # aiohttp sets TCP_NODELAY itself today; set it again so a small event never waits for Nagle.
    sock = request.transport.get_extra_info("socket") if request.transport is not None else None
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


async def start_stream(request: web.Request) -> web.StreamResponse:
    """Send the event-stream headers now (compression is never enabled: it would buffer events)."""
    resp = web.StreamResponse(headers=SSE_HEADERS)
    _nodelay(request)
    await resp.prepare(request)
    return resp


async def send(request: web.Request, resp: web.StreamResponse, data: bytes) -> None:
    """One write of a whole event, then drain, so it leaves now and a slow reader pushes back."""
    await resp.write(data)
    await request.writer.drain()


async def wait_with_comments(request: web.Request, resp: web.StreamResponse, until: float,
                             every_ms: int, comment: bytes) -> None:
    """Wait until loop time `until`, writing `comment` every `every_ms` meanwhile (0: silently)."""
    if every_ms > 0:
        start, every = asyncio.get_running_loop().time(), every_ms / 1000
        k = 1
        while start + k * every < until:
            await sleep_until(start + k * every)
            await send(request, resp, comment)
            k += 1
    await sleep_until(until)
