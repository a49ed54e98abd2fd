"""GET /sse: `count` timestamped events on a drift-free schedule, for gaps, stalls and delay variation."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass

from aiohttp import web

from netprobe.net.pacing import sleep_until
from netprobe.probes.sse.params import Limits, ParamError, int_param
from netprobe.probes.sse.stream import CONFIG, send, start_stream, wait_with_comments


@dataclass(frozen=True)
class SseParams:
    count: int = 100
    interval_ms: int = 100
    size: int = 64
    think_ms: int = 0
    ping_ms: int = 0
    pause_at: int | None = None
    pause_ms: int = 0

    @classmethod
    def parse(cls, query: Mapping[str, str], limits: Limits) -> SseParams:
        d = cls()
        count = int_param(query, "count", d.count, 0, limits.max_count)
        pause_at: int | None = None
        if "pause_at" in query:
            pause_at = int_param(query, "pause_at", 0, 0, max(count - 1, 0))
        return cls(
            count=count,
            interval_ms=int_param(query, "interval_ms", d.interval_ms, limits.min_interval_ms,
                                  limits.max_interval_ms),
            size=int_param(query, "size", d.size, 0, limits.max_size),
            think_ms=int_param(query, "think_ms", d.think_ms, 0, limits.max_wait_ms),
            ping_ms=int_param(query, "ping_ms", d.ping_ms, 0, limits.max_ping_ms),
            pause_at=pause_at,
            pause_ms=int_param(query, "pause_ms", d.pause_ms, 0, limits.max_wait_ms),
        )


def event(seq: int, size: int) -> bytes:
    """`id: seq` + `data: {"seq","ts","pad"}`; the JSON is `size` bytes (or its minimum, if larger)."""
    ts = time.time()  # taken as late as possible: the client subtracts it from the arrival time
    head = f'{{"seq":{seq},"ts":{ts!r},"pad":"'
    pad = "x" * max(0, size - len(head) - 2)
    return f'id: {seq}\ndata: {head}{pad}"}}\n\n'.encode("ascii")


async def handle_sse(request: web.Request) -> web.StreamResponse:
    try:
        p = SseParams.parse(request.query, request.app[CONFIG].limits)
    except ParamError as exc:
        return web.Response(status=400, text=f"{exc}\n")
    resp = await start_stream(request)
    start = asyncio.get_running_loop().time() + p.think_ms / 1000
    interval, pause = p.interval_ms / 1000, p.pause_ms / 1000
    try:
        await wait_with_comments(request, resp, start, p.ping_ms, b": ping\n\n")
        for seq in range(p.count):
            # Event i is due at start + i·interval (+ the one pause from pause_at on), whatever
            # the previous writes cost, so lateness never accumulates.
            extra = pause if p.pause_at is not None and seq >= p.pause_at else 0.0
            await sleep_until(start + seq * interval + extra)
            await send(request, resp, event(seq, p.size))
        await resp.write_eof()
    except ConnectionResetError:
        pass  # the client left mid-stream: nothing to finish
    return resp
