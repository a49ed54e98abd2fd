"""netprobe.net.http1 against raw loopback servers: each response's framing, split at every byte, and
the classified failures (the sse probe and the uplink report these kinds as data)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import Any

import pytest

from netprobe.net import http1

Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Any]


async def serve(script: Script) -> tuple[asyncio.Server, str]:
    server = await asyncio.start_server(script, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}"


def replying(*parts: bytes, pause: float = 0.0, seen: list[bytes] | None = None) -> Script:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        if seen is not None:
            seen.append(head)
            length = [int(v) for k, _, v in (line.partition(b":") for line in head.split(b"\r\n"))
                      if k.lower() == b"content-length"]
            if length:
                seen.append(await reader.readexactly(length[0]))
        for part in parts:
            writer.write(part)
            await writer.drain()
            if pause:
                await asyncio.sleep(pause)
        writer.close()
    return script


async def body_of(url: str, **kw: Any) -> tuple[http1.Response, bytes]:
    resp = await http1.request("GET", url, headers={}, **kw)
    try:
        out = b""
        while chunk := await resp.read_chunk():
            out += chunk
        return resp, out
    finally:
        resp.close()


def split_everywhere(raw: bytes) -> list[list[bytes]]:
    return [[raw]] + [[raw[:i], raw[i:]] for i in range(1, len(raw))]


CHUNKED = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/event-stream\r\n\r\n"
           b"5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nX-Trailer: t\r\n\r\n")


@pytest.mark.parametrize("parts", split_everywhere(CHUNKED))
async def test_chunked_body_split_anywhere(parts: list[bytes]) -> None:
    server, url = await serve(replying(*parts, pause=0.002))
    async with server:
        resp, body = await body_of(url + "/x")
    assert resp.status == 200 and resp.headers["content-type"] == "text/event-stream"
    assert body == b"hello, world" and resp.total_bytes == 12


async def test_content_length_and_end_of_connection_bodies() -> None:
    server, url = await serve(replying(b"HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\n\r\nabcIGNORED"))
    async with server:
        resp, body = await body_of(url)
    assert (resp.status, resp.reason, body) == (404, "Not Found", b"abc")
    server, url = await serve(replying(b"HTTP/1.0 200 OK\r\n\r\nuntil", b" the end"))
    async with server:
        resp, body = await body_of(url)
    assert body == b"until the end"


async def test_request_line_headers_and_body() -> None:
    seen: list[bytes] = []
    server, url = await serve(replying(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", seen=seen))
    async with server:
        resp = await http1.request("POST", url + "/api/v1/results?a=1", headers={"X-Token": "t"}, body=b"{}")
        assert await resp.read(100) == b""
        resp.close()
    head = seen[0].decode()
    assert head.startswith("POST /api/v1/results?a=1 HTTP/1.1\r\n")
    assert f"Host: {url.removeprefix('http://')}\r\n" in head and "X-Token: t\r\n" in head
    assert "Content-Length: 2\r\n" in head and "Connection: close\r\n" in head and seen[1] == b"{}"


async def test_a_body_cut_short_is_truncated() -> None:
    for raw in (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel"):
        server, url = await serve(replying(raw))
        async with server:
            with pytest.raises(http1.HttpError) as err:
                await body_of(url)
        assert err.value.kind == "truncated"


@pytest.mark.parametrize("raw", [b"SSH-2.0-OpenSSH\r\n\r\n", b"HTTP/1.1 200 OK\r\nbad header\r\n\r\n",
                                 b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
                                 b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 20_000])
async def test_not_http_is_malformed(raw: bytes) -> None:
    server, url = await serve(replying(raw))
    async with server:
        with pytest.raises(http1.HttpError) as err:
            await body_of(url)
    assert err.value.kind == "malformed"


async def test_closed_before_any_answer() -> None:
    server, url = await serve(replying())
    async with server:
        with pytest.raises(http1.HttpError) as err:
            await body_of(url)
    assert err.value.kind == "truncated"


async def test_connect_failures_are_classified() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(http1.HttpError) as err:
        await http1.request("GET", f"http://127.0.0.1:{port}/", headers={})
    assert err.value.kind == "connect"
    with pytest.raises(http1.HttpError) as err:
        await http1.request("GET", "http://no-such-host.invalid/", headers={})
    assert err.value.kind == "dns"
    with pytest.raises(http1.HttpError) as err:
        await http1.request("GET", "ftp://example.invalid/", headers={})
    assert err.value.kind == "malformed"


async def test_timing_marks_and_a_literal_skips_dns() -> None:
    server, url = await serve(replying(b"HTTP/1.1 204 No Content\r\n\r\n"))
    timing = http1.Timing()
    async with server:
        resp, body = await body_of(url, timing=timing)
    assert resp.status == 204 and body == b""
    assert timing.dns_start_ns == 0 and timing.dns_end_ns == 0
    assert 0 < timing.connect_start_ns <= timing.connect_end_ns <= timing.written_ns <= timing.head_ns


async def test_a_large_body_pauses_reading_and_resumes() -> None:
    block = b"x" * (1 << 20)
    raw = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (5 * len(block))
    server, url = await serve(replying(raw, *([block] * 5)))
    async with server:
        resp = await http1.request("GET", url, headers={})
        await asyncio.sleep(0.2)   # let the socket fill the buffer past the high-water mark
        total = 0
        while chunk := await resp.read_chunk():
            total += len(chunk)
        resp.close()
    assert total == 5 * len(block)


async def test_tls_failure_is_classified() -> None:
    """A server that answers the TLS hello with plain HTTP: the handshake fails."""

    async def hello_then_garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(100)
        writer.write(b"HTTP/1.1 400 Bad Request\r\n\r\n")
        writer.close()

    server, url = await serve(hello_then_garbage)
    async with server:
        with pytest.raises(http1.HttpError) as err:
            await http1.request("GET", url.replace("http://", "https://"), headers={}, connect_timeout=5)
    assert err.value.kind == "tls"
