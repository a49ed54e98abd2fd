"""A small HTTP/1.1 client: one request per connection, the response body streamed as it arrives.

The agent's two HTTP clients (the uplink's POST to the collector and the sse probe's streamed GET or
POST) need one request on a fresh connection, timed phases and a body read chunk by chunk, without
the modules and import-time TLS contexts a full client would keep resident. What it does: DNS (unless
the host is an address literal) and happy-eyeballs connect (aiohappyeyeballs, 0.25 s), TLS with the
system's verified default context (made on the first https request, not at import), the request
written at once, the status line and headers (capped), and a body framed by Content-Length, chunked
transfer coding or the end of the connection. What it does not: redirects, keep-alive, proxies,
cookies, decompression; its callers want none of them.

Failures raise `HttpError` with a `kind` the callers report as data: "dns", "connect", "tls",
"timeout" (the connect phase), "malformed" (not HTTP), "truncated" (the connection ended early).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections import deque
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from netprobe.net.resolve import parse_literal

MAX_HEAD = 64 * 1024          # status line + headers
MAX_CHUNK_LINE = 8 * 1024     # a chunk-size line (with extensions) or a trailer line
HIGH_WATER = 1 << 20          # buffered body bytes before the socket is paused
HAPPY_EYEBALLS_DELAY = 0.25   # aiohttp's

_tls: ssl.SSLContext | None = None


def tls_context() -> ssl.SSLContext:
    """The verified default context, made once and only when an https URL is used: loading the CA
    file costs memory that a plain-HTTP agent never needs."""
    global _tls
    if _tls is None:
        ctx = ssl.create_default_context()
        ctx.set_alpn_protocols(["http/1.1"])
        _tls = ctx
    return _tls


class HttpError(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(slots=True)
class Timing:
    """time.time_ns() marks of the phases; dns_* stay 0 for an address literal."""

    dns_start_ns: int = 0
    dns_end_ns: int = 0
    connect_start_ns: int = 0
    connect_end_ns: int = 0   # TCP connected and, for https, TLS done
    written_ns: int = 0       # the request handed to the kernel
    head_ns: int = 0          # the response's status line and headers parsed


class Response(asyncio.Protocol):
    """The connection's protocol and the response it reads. `total_bytes` counts body bytes decoded
    so far (netprobe.probes.sse.kstamps pairs it with each read's kernel stamp)."""

    def __init__(self, head_timing: Timing | None) -> None:
        self.transport: asyncio.Transport | None = None
        self.status = 0
        self.reason = ""
        self.headers: dict[str, str] = {}   # lower-case names; repeated fields joined with ", "
        self.total_bytes = 0
        self._timing = head_timing
        self._buf = bytearray()
        self._state = "head"        # head, length, chunk_size, chunk_data, chunk_crlf, trailers, eof, done
        self._left = 0              # bytes left of the body (length) or of the current chunk
        self._body: deque[bytes] = deque()
        self._buffered = 0
        self._paused = False
        self._error: HttpError | None = None
        self._closed = False
        self._waiter: asyncio.Future[None] | None = None
        self._head_done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.no_body = False        # a HEAD request, 1xx/204/304: the head ends the response

    # --- asyncio.Protocol -------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self._state == "head":
            self._buf += data
            self._parse_head()
        elif self._state != "done":
            self._feed(data)
        self._wake()

    def eof_received(self) -> bool | None:
        self._ended()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._ended(exc)
        if not self._head_done.done():
            self._head_done.set_exception(self._error or HttpError("truncated", "connection closed"))
        self._wake()

    # --- parsing ----------------------------------------------------------------------------------

    def _fail(self, kind: str, message: str) -> None:
        if self._error is None and self._state != "done":
            self._error = HttpError(kind, message)
        if not self._head_done.done():
            self._head_done.set_exception(self._error or HttpError(kind, message))
        if self.transport is not None:
            self.transport.abort()

    def _parse_head(self) -> None:
        end = self._buf.find(b"\r\n\r\n")
        if end < 0:
            if len(self._buf) > MAX_HEAD:
                self._fail("malformed", f"response headers longer than {MAX_HEAD} bytes")
            return
        head, rest = bytes(self._buf[:end]), bytes(self._buf[end + 4:])
        self._buf.clear()
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            self._fail("malformed", f"not an HTTP/1 response: {lines[0][:80]!r}")
            return
        status = int(parts[1])
        if 100 <= status < 200 and status != 101:  # 100 Continue and the like: the real head follows
            self._buf += rest
            self._parse_head()
            return
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep or not name or name != name.strip():
                self._fail("malformed", f"bad header line {line[:80]!r}")
                return
            key, value = name.lower(), value.strip()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        self.status, self.reason, self.headers = status, parts[2] if len(parts) > 2 else "", headers
        if self._timing is not None:
            self._timing.head_ns = time.time_ns()
        if self.no_body or status in (101, 204, 304):
            self._state = "done"
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            self._state = "chunk_size"
        elif "content-length" in headers:
            length = headers["content-length"].split(",")[0].strip()
            if not length.isdigit():
                self._fail("malformed", f"bad Content-Length {length[:40]!r}")
                return
            self._left = int(length)
            self._state = "length" if self._left else "done"
        else:
            self._state = "eof"
        self._head_done.set_result(None)
        if rest:
            self._feed(rest)

    def _feed(self, data: bytes) -> None:
        if self._state == "length":
            part = data[:self._left]
            self._left -= len(part)
            self._push(part)
            if not self._left:
                self._state = "done"
            return
        if self._state == "eof":
            self._push(data)
            return
        self._buf += data
        buf = self._buf
        pos = 0
        while self._state != "done":
            if self._state == "chunk_data":
                take = min(self._left, len(buf) - pos)
                if not take:
                    break
                self._push(bytes(buf[pos:pos + take]))
                pos += take
                self._left -= take
                if not self._left:
                    self._state = "chunk_crlf"
                continue
            nl = buf.find(b"\r\n", pos)
            if nl < 0:
                if len(buf) - pos > MAX_CHUNK_LINE:
                    self._fail("malformed", "chunk framing line too long")
                    return
                break
            line = bytes(buf[pos:nl])
            pos = nl + 2
            if self._state == "chunk_crlf":
                if line:
                    self._fail("malformed", "chunk data not followed by CRLF")
                    return
                self._state = "chunk_size"
            elif self._state == "chunk_size":
                size = line.split(b";", 1)[0].strip()
                try:
                    self._left = int(size, 16)
                except ValueError:
                    self._fail("malformed", f"bad chunk size {size[:20]!r}")
                    return
                self._state = "chunk_data" if self._left else "trailers"
            elif not line:  # trailers: an empty line ends them, and the body
                self._state = "done"
        del buf[:pos]

    def _push(self, data: bytes) -> None:
        if not data:
            return
        self._body.append(data)
        self.total_bytes += len(data)
        self._buffered += len(data)
        if self._buffered > HIGH_WATER and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()

    def _ended(self, exc: Exception | None = None) -> None:
        if self._state == "eof":
            self._state = "done"
        elif self._state != "done" and self._error is None:
            detail = f": {exc}" if exc else ""
            self._error = HttpError("truncated", f"the connection closed before the response ended{detail}")

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    # --- reading ----------------------------------------------------------------------------------

    async def read_chunk(self) -> bytes:
        """The body bytes that arrived since the last call (waiting for some); b"" at the end.
        Raises HttpError when the connection ends before the body does."""
        while not self._body:
            if self._state == "done":
                return b""
            if self._error is not None:
                raise self._error
            if self._closed:
                raise HttpError("truncated", "the connection closed before the response ended")
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        data = b"".join(self._body) if len(self._body) > 1 else self._body[0]
        self._body.clear()
        self._buffered = 0
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        return data

    async def read(self, limit: int) -> bytes:
        """Up to `limit` bytes of the body (the rest is not read: the connection is closed after)."""
        out = bytearray()
        while len(out) < limit and (chunk := await self.read_chunk()):
            out += chunk
        return bytes(out[:limit])

    def close(self) -> None:
        if self.transport is None or self._closed:
            return
        if self._state == "done":
            self.transport.close()
        else:  # unread body: no lingering close that waits on a peer still sending
            self.transport.abort()


@dataclass(frozen=True, slots=True)
class Url:
    https: bool
    host: str
    port: int
    target: str       # path and query
    host_header: str


def parse_url(url: str) -> Url:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise HttpError("malformed", f"{url!r} is not an http(s) URL")
    https = parts.scheme == "https"
    try:
        port = parts.port or (443 if https else 80)
    except ValueError as exc:
        raise HttpError("malformed", f"{url!r}: {exc}") from None
    host = parts.hostname
    shown = f"[{host}]" if ":" in host else host
    host_header = shown if port == (443 if https else 80) else f"{shown}:{port}"
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Url(https, host, port, target, host_header)


async def _connect(url: Url, timing: Timing) -> socket.socket:
    loop = asyncio.get_running_loop()
    timing.connect_start_ns = time.time_ns()
    literal = parse_literal(url.host)
    if literal is not None:
        family = socket.AF_INET6 if literal.version == 6 else socket.AF_INET
        infos: list[Any] = [(family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (url.host, url.port))]
    else:
        timing.dns_start_ns = timing.connect_start_ns
        try:
            infos = await loop.getaddrinfo(url.host, url.port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise HttpError("dns", f"cannot resolve {url.host}: {exc.strerror or exc}") from None
        timing.dns_end_ns = time.time_ns()
    from aiohappyeyeballs import start_connection

    try:
        return await start_connection(infos, happy_eyeballs_delay=HAPPY_EYEBALLS_DELAY)
    except OSError as exc:
        raise HttpError("connect", f"cannot connect to {url.host_header}: {exc.strerror or exc}") from None


async def request(method: str, url: str, *, headers: dict[str, str], body: bytes | None = None,
                  connect_timeout: float | None = None, timing: Timing | None = None) -> Response:
    """Send one request on a new connection and return once the response's head is in. The caller
    reads the body (`read_chunk`, `read`) and closes the response."""
    u = parse_url(url)
    timing = timing if timing is not None else Timing()
    loop = asyncio.get_running_loop()
    resp = Response(timing)
    resp.no_body = method == "HEAD"
    try:
        async with asyncio.timeout(connect_timeout):
            sock = await _connect(u, timing)
            try:
                await loop.create_connection(lambda: resp, sock=sock,
                                             ssl=tls_context() if u.https else None,
                                             server_hostname=u.host if u.https else None)
            except ssl.SSLError as exc:
                sock.close()
                raise HttpError("tls", f"TLS with {u.host_header}: {exc}") from None
            except OSError as exc:
                sock.close()
                raise HttpError("connect", f"cannot connect to {u.host_header}: {exc.strerror or exc}") \
                    from None
    except TimeoutError:
        raise HttpError("timeout", f"connecting to {u.host_header} took over {connect_timeout:g}s") from None
    timing.connect_end_ns = time.time_ns()
    lines = [f"{method} {u.target} HTTP/1.1", f"Host: {u.host_header}"]
    given = {k.lower() for k in headers}
    lines += [f"{k}: {v}" for k, v in headers.items()]
    if body is not None and "content-length" not in given:
        lines.append(f"Content-Length: {len(body)}")
    if "connection" not in given:
        lines.append("Connection: close")
    assert resp.transport is not None
    data = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")
    # stamped just before the (non-blocking) write: a busy host that preempts us right after it
    # would otherwise date the request after the server had already answered it
    timing.written_ns = time.time_ns()
    resp.transport.write(data)
    try:
        await resp._head_done
    except BaseException:
        resp.close()
        raise
    return resp
