"""One streamed HTTP response read the way a browser reads it: timed phases, a timestamp per network
read, and hard caps so a hostile or broken server ends in a classified error, never a hang.

netprobe.net.http1 does the HTTP (a fresh connection per request, as a new user's browser makes) and
times DNS, connect (with TLS), request written and response headers. The event-stream parsing is ours
(netprobe.probes.sse.parser): the client libraries either break the WHATWG rules or reconnect on their own,
which would re-send a POST.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from netprobe import __version__
from netprobe.net import http1
from netprobe.probes.sse.kstamps import KernelStamps
from netprobe.probes.sse.parser import SseComment, SseEvent, SseParser, SseTooLarge


@dataclass(frozen=True, slots=True)
class Limits:
    total_s: float = 30.0           # the whole exchange, connect included
    connect_s: float = 10.0
    idle_s: float = 10.0            # no byte for this long: `stalled`
    max_event_bytes: int = 1 << 20
    max_total_bytes: int = 64 << 20


@dataclass(slots=True)
class Capture:
    """What happened on the wire; times in ns of CLOCK_REALTIME (comparable with a server's `ts`)."""

    start_ns: int = 0
    dns_ms: float | None = None
    connect_ms: float | None = None
    written_ns: int | None = None
    headers_ns: int | None = None
    end_ns: int | None = None
    status: int | None = None
    content_type: str | None = None
    content_encoding: str | None = None
    bytes: int = 0
    completed: bool = False
    error_kind: str | None = None
    error: str | None = None

    def ms_after_written(self, t_ns: int | None) -> float | None:
        if t_ns is None or self.written_ns is None:
            return None
        return (t_ns - self.written_ns) / 1e6


# on_event returns True when the stream is complete by its own rules (openai's [DONE])
EventSink = Callable[[SseEvent], bool]
CommentSink = Callable[[SseComment], None]


async def stream(method: str, url: str, *, headers: Mapping[str, str], body: Any, limits: Limits,
                 on_event: EventSink, on_comment: CommentSink) -> Capture:
    """Send the request (`body`, when not None, as JSON) and read the event stream to its end, a cap,
    or an error (in Capture)."""
    cap = Capture(start_ns=time.time_ns())
    timing = http1.Timing()
    parser = SseParser(max_event_bytes=limits.max_event_bytes)
    try:
        async with asyncio.timeout(limits.total_s):
            await _exchange(method, url, headers, body, limits, cap, timing, parser, on_event, on_comment)
    except SseTooLarge as exc:
        cap.error_kind, cap.error = "too_large", str(exc)
    except http1.HttpError as exc:
        # a stream that had started and then broke is truncated, whatever broke it; a connection
        # closed before any answer is a connect failure, as aiohttp's ServerDisconnectedError was
        if cap.status is not None:
            kind = "malformed" if exc.kind == "malformed" else "truncated"
        else:
            kind = "connect" if exc.kind == "truncated" else exc.kind
        cap.error_kind, cap.error = kind, str(exc)
    except TimeoutError:  # before OSError, of which it is one
        cap.error_kind, cap.error = "timeout", f"the stream did not end within {limits.total_s:g}s"
    except OSError as exc:  # a write or a read the transport reported
        cap.error_kind = "truncated" if cap.status is not None else "connect"
        cap.error = str(exc) or type(exc).__name__
    cap.end_ns = cap.end_ns or time.time_ns()
    _timings(cap, timing)
    return cap


async def _exchange(method: str, url: str, headers: Mapping[str, str], body: Any, limits: Limits,
                    cap: Capture, timing: http1.Timing, parser: SseParser, on_event: EventSink,
                    on_comment: CommentSink) -> None:
    sent = {"User-Agent": f"netprobe/{__version__}", **headers}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        sent.setdefault("Content-Type", "application/json")
    resp = await http1.request(method, url, headers=sent, body=data, connect_timeout=limits.connect_s,
                               timing=timing)
    try:
        await _read(resp, limits, cap, timing, parser, on_event, on_comment)
    finally:
        resp.close()


async def _read(resp: http1.Response, limits: Limits, cap: Capture, timing: http1.Timing, parser: SseParser,
                on_event: EventSink, on_comment: CommentSink) -> None:
    cap.headers_ns = timing.head_ns or time.time_ns()
    if not head_ok(cap, resp.status, resp.reason, resp.headers):
        return
    stamps = KernelStamps.attach(resp, cap.headers_ns)
    await read_events(resp.read_chunk, limits, cap, parser, on_event, on_comment,
                      stamps.stamp_for if stamps is not None else None)


def head_ok(cap: Capture, status: int, reason: str | None, headers: Mapping[str, str]) -> bool:
    """Record the response head; False (with the error in `cap`) unless it starts an event stream."""
    cap.status = status
    cap.content_type = headers.get("content-type")
    cap.content_encoding = headers.get("content-encoding")
    if status >= 300:
        cap.error_kind = f"http_{status}"
        cap.error = f"HTTP {status} {reason or ''}".strip()
        return False
    mime = (cap.content_type or "").split(";", 1)[0].strip().lower()
    if mime != "text/event-stream":
        cap.error_kind = "malformed"
        cap.error = f"expected Content-Type text/event-stream, got {cap.content_type or 'none'}"
        return False
    return True


async def read_events(read_chunk: Callable[[], Awaitable[bytes]], limits: Limits, cap: Capture,
                      parser: SseParser, on_event: EventSink, on_comment: CommentSink,
                      stamp_for: Callable[[int], int | None] | None = None) -> None:
    """Read chunks (b"" at the end) into events until the stream ends, a sink says it is complete, a
    cap, or no byte for limits.idle_s (`stalled`). `stamp_for(bytes so far)`: the kernel's arrival
    time of that byte, when known."""
    loop = asyncio.get_running_loop()
    # The idle deadline moves with every chunk, but its timer only when it fires: rescheduling the
    # timeout per chunk left a cancelled timer in the event loop's heap for idle_s each time.
    idle = asyncio.timeout(None)
    last = loop.time()
    armed = last + limits.idle_s
    watchdog: asyncio.TimerHandle | None = None

    def check() -> None:
        nonlocal armed, watchdog
        if last + limits.idle_s <= armed:  # no byte since it was armed: stalled, as the timeout was
            watchdog = None
            idle.reschedule(loop.time())
            return
        armed = last + limits.idle_s
        watchdog = loop.call_at(armed, check)

    watchdog = loop.call_at(armed, check)
    try:
        async with idle:
            while chunk := await read_chunk():
                now = time.time_ns()
                last = loop.time()
                cap.bytes += len(chunk)
                if cap.bytes > limits.max_total_bytes:
                    raise SseTooLarge(f"the stream passed {limits.max_total_bytes} bytes")
                arrived = (stamp_for(cap.bytes) if stamp_for is not None else None) or now
                for item in parser.feed(chunk, arrived):
                    if isinstance(item, SseComment):
                        on_comment(item)
                    elif on_event(item):
                        cap.completed, cap.end_ns = True, now
                        return
    except TimeoutError:
        if not idle.expired():
            raise
        cap.error_kind, cap.error = "stalled", f"no data for {limits.idle_s:g}s"
        cap.end_ns = time.time_ns()
        return
    finally:
        if watchdog is not None:
            watchdog.cancel()
    cap.end_ns = time.time_ns()
    if parser.close():
        cap.error_kind, cap.error = "truncated", "the stream ended inside an event"
    else:
        cap.completed = True


def _timings(cap: Capture, t: http1.Timing) -> None:
    if t.dns_start_ns and t.dns_end_ns:
        cap.dns_ms = (t.dns_end_ns - t.dns_start_ns) / 1e6
    if t.connect_start_ns and t.connect_end_ns:
        span = (t.connect_end_ns - t.connect_start_ns) / 1e6
        cap.connect_ms = max(0.0, span - (cap.dns_ms or 0.0))  # the span starts with the lookup
    cap.written_ns = t.written_ns or cap.start_ns
