"""The compare command's HTTP: an aiohttp session that keeps connections alive, as `vllm bench serve`'s
client does (the agent's own client, netprobe.net.http1, opens a connection per request on purpose:
what a new user's browser does). The stream is read with the sse probe's parser and classified the same
way; Capture and Limits are the sse client's."""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections.abc import Mapping
from typing import Any

import aiohttp

from netprobe.probes.sse.client import Capture, EventSink, Limits, head_ok, read_events
from netprobe.probes.sse.parser import SseParser, SseTooLarge

_FINISH_S = 1.0        # how long the end of a completed stream's body is waited for


def new_session() -> aiohttp.ClientSession:
    """Connections kept alive and reused across requests; no decompression (it would buffer events)."""
    connector = aiohttp.TCPConnector(limit=0, enable_cleanup_closed=True)
    return aiohttp.ClientSession(connector=connector, auto_decompress=False,
                                 timeout=aiohttp.ClientTimeout(total=None))


async def stream(session: aiohttp.ClientSession, url: str, *, headers: Mapping[str, str], body: Any,
                 limits: Limits, on_event: EventSink) -> Capture:
    """POST the request and read the event stream to its end, a cap, or an error (in Capture); comments
    are ignored."""
    cap = Capture(start_ns=time.time_ns())
    parser = SseParser(max_event_bytes=limits.max_event_bytes)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=limits.connect_s, connect=limits.connect_s)
    try:
        async with asyncio.timeout(limits.total_s):
            cap.written_ns = time.time_ns()
            async with session.request("POST", url, headers=headers, json=body, timeout=timeout,
                                       allow_redirects=False) as resp:
                cap.headers_ns = time.time_ns()
                if head_ok(cap, resp.status, resp.reason, {k.lower(): v for k, v in resp.headers.items()}):
                    await read_events(resp.content.readany, limits, cap, parser, on_event, lambda _c: None)
                    if cap.completed:
                        await _finish_body(resp)
    except SseTooLarge as exc:
        cap.error_kind, cap.error = "too_large", str(exc)
    except aiohttp.ClientError as exc:  # before TimeoutError: aiohttp's connect timeout is both
        cap.error_kind, cap.error = _classify(exc, cap)
    except TimeoutError:
        cap.error_kind, cap.error = "timeout", f"the stream did not end within {limits.total_s:g}s"
    cap.end_ns = cap.end_ns or time.time_ns()
    return cap


async def _finish_body(resp: aiohttp.ClientResponse) -> None:
    """Read what follows the stream's last event (the chunked body's terminator) before the response
    is released: aiohttp closes a connection whose body was left unread, and the next request would
    pay a new handshake, one more round trip in its TTFT on a "warm" connection."""
    try:
        async with asyncio.timeout(_FINISH_S):
            await resp.content.read()
    except (TimeoutError, aiohttp.ClientError):
        pass                # a server still sending after [DONE]: the connection is dropped


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
