"""One streamed HTTP response read the way a browser reads it: timed phases, a timestamp per network
read, and hard caps so a hostile or broken server ends in a classified error, never a hang.

aiohttp does the HTTP; its trace hooks time DNS, connect, request written and response headers. The
event-stream parsing is ours (netprobe.sse.parser): the client libraries either break the WHATWG rules
or reconnect on their own, which would re-send a POST.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import aiohttp

from netprobe.sse.kstamps import KernelStamps
from netprobe.sse.parser import SseComment, SseEvent, SseParser, SseTooLarge

READ_CHUNK = 64 * 1024


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
    reused: bool = False
    status: int | None = None
    content_type: str | None = None
    content_encoding: str | None = None
    bytes: int = 0
    completed: bool = False
    error_kind: str | None = None
    error: str | None = None
    _marks: dict[str, int] = field(default_factory=dict)

    def ms_after_written(self, t_ns: int | None) -> float | None:
        if t_ns is None or self.written_ns is None:
            return None
        return (t_ns - self.written_ns) / 1e6


# on_event returns True when the stream is complete by its own rules (openai's [DONE])
EventSink = Callable[[SseEvent], bool]
CommentSink = Callable[[SseComment], None]


def new_session(*, reuse: bool = False, limit: int = 0) -> aiohttp.ClientSession:
    """A session whose requests are traced. `reuse=False`: a fresh connection (and DNS) per request,
    as a new user's browser makes — what the agent measures."""
    trace = aiohttp.TraceConfig()
    for name in ("dns_resolvehost_start", "dns_resolvehost_end", "connection_create_start",
                 "connection_create_end", "request_headers_sent", "request_chunk_sent", "request_end"):
        getattr(trace, f"on_{name}").append(_marker(name))
    trace.on_connection_reuseconn.append(_reused)
    connector = aiohttp.TCPConnector(limit=limit, force_close=not reuse, use_dns_cache=reuse,
                                     enable_cleanup_closed=True)
    return aiohttp.ClientSession(connector=connector, trace_configs=[trace], auto_decompress=False,
                                 timeout=aiohttp.ClientTimeout(total=None))


def _marker(name: str) -> Callable[[aiohttp.ClientSession, SimpleNamespace, object], Any]:
    async def mark(_s: aiohttp.ClientSession, ctx: SimpleNamespace, _p: object) -> None:
        cap = ctx.trace_request_ctx
        if isinstance(cap, Capture):
            cap._marks[name] = time.time_ns()
    return mark


async def _reused(_s: aiohttp.ClientSession, ctx: SimpleNamespace, _p: object) -> None:
    if isinstance(ctx.trace_request_ctx, Capture):
        ctx.trace_request_ctx.reused = True


async def stream(session: aiohttp.ClientSession, method: str, url: str, *, headers: Mapping[str, str],
                 body: Any, limits: Limits, on_event: EventSink, on_comment: CommentSink) -> Capture:
    """Send the request and read the event stream to its end, a cap, or an error (in Capture)."""
    cap = Capture(start_ns=time.time_ns())
    parser = SseParser(max_event_bytes=limits.max_event_bytes)
    try:
        async with asyncio.timeout(limits.total_s):
            await _exchange(session, method, url, headers, body, limits, cap, parser, on_event, on_comment)
    except SseTooLarge as exc:
        cap.error_kind, cap.error = "too_large", str(exc)
    except aiohttp.ClientError as exc:  # before TimeoutError: aiohttp's connect timeout is both
        cap.error_kind, cap.error = _classify(exc, cap)
    except TimeoutError:
        cap.error_kind, cap.error = "timeout", f"the stream did not end within {limits.total_s:g}s"
    cap.end_ns = cap.end_ns or time.time_ns()
    _timings(cap)
    return cap


async def _exchange(session: aiohttp.ClientSession, method: str, url: str, headers: Mapping[str, str],
                    body: Any, limits: Limits, cap: Capture, parser: SseParser, on_event: EventSink,
                    on_comment: CommentSink) -> None:
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=limits.connect_s, connect=limits.connect_s)
    async with session.request(method, url, headers=headers, json=body, timeout=timeout,
                               trace_request_ctx=cap, allow_redirects=False) as resp:
        cap.headers_ns = cap._marks.get("request_end") or time.time_ns()
        cap.status = resp.status
        cap.content_type = resp.headers.get("Content-Type")
        cap.content_encoding = resp.headers.get("Content-Encoding")
        if resp.status >= 300:
            cap.error_kind = f"http_{resp.status}"
            cap.error = f"HTTP {resp.status} {resp.reason or ''}".strip()
            return
        mime = (cap.content_type or "").split(";", 1)[0].strip().lower()
        if mime != "text/event-stream":
            cap.error_kind = "malformed"
            cap.error = f"expected Content-Type text/event-stream, got {cap.content_type or 'none'}"
            return
        loop = asyncio.get_running_loop()
        stamps = KernelStamps.attach(resp, cap.headers_ns)
        idle = asyncio.timeout(limits.idle_s)
        try:
            async with idle:
                while chunk := await resp.content.readany():
                    now = time.time_ns()
                    idle.reschedule(loop.time() + limits.idle_s)
                    cap.bytes += len(chunk)
                    if cap.bytes > limits.max_total_bytes:
                        raise SseTooLarge(f"the stream passed {limits.max_total_bytes} bytes")
                    arrived = (stamps.stamp_for(cap.bytes) if stamps is not None else None) or now
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
        cap.end_ns = time.time_ns()
        if parser.close():
            cap.error_kind, cap.error = "truncated", "the stream ended inside an event"
        else:
            cap.completed = True


def _classify(exc: aiohttp.ClientError, cap: Capture) -> tuple[str, str]:
    text = str(exc) or type(exc).__name__
    if isinstance(exc, aiohttp.ClientConnectorCertificateError | aiohttp.ClientSSLError):
        return "tls", text
    if isinstance(exc, aiohttp.ClientConnectorError):
        os_error = getattr(exc, "os_error", None)
        if isinstance(os_error, socket.gaierror) or "Name or service not known" in text:
            return "dns", text
        if isinstance(os_error, ssl.SSLError):
            return "tls", text
        return "connect", text
    if isinstance(exc, aiohttp.ServerTimeoutError):
        return "timeout", text
    if cap.status is not None:  # the response had started: the peer cut it short
        return "truncated", text
    return "connect", text


def _timings(cap: Capture) -> None:
    m = cap._marks
    if "dns_resolvehost_start" in m and "dns_resolvehost_end" in m:
        cap.dns_ms = (m["dns_resolvehost_end"] - m["dns_resolvehost_start"]) / 1e6
    if "connection_create_start" in m and "connection_create_end" in m:
        span = (m["connection_create_end"] - m["connection_create_start"]) / 1e6
        cap.connect_ms = max(0.0, span - (cap.dns_ms or 0.0))  # aiohttp resolves inside "create"
    sent = [m[k] for k in ("request_headers_sent", "request_chunk_sent") if k in m]
    cap.written_ns = max(sent) if sent else cap.start_ns
