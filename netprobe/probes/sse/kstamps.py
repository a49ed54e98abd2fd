"""Kernel receive timestamps for the body of an HTTP response (netprobe.net.http1).

A timestamp taken in Python when a read returns includes the event loop's queue: with a few hundred
streams the loop hands over reads in batches and an event waits behind the rest of its batch (P99 of
several ms in bench/sse_streams). The kernel stamps each TCP segment as it arrives (SO_TIMESTAMPNS,
handed over by recvmsg). The client reads the socket through asyncio's transport, so this swaps that
transport's read callback for one that reads with recvmsg and remembers, for each read, how many body
bytes the client had parsed after it and the kernel's stamp. A body chunk's stamp is then the stamp of
the read that delivered its last byte.

This reaches into asyncio's selector transport (CPython's `_read_ready_cb`, `_sock`); where they are not
there (another event loop), `attach` returns None and the caller keeps its own timestamps.
"""

from __future__ import annotations

import socket
import time
from collections import deque
from typing import Any

from netprobe.net import rxstamp


class KernelStamps:
    def __init__(self, transport: Any, sock: socket.socket, reader: Any, since_ns: int) -> None:
        self._transport = transport
        self._sock = sock
        self._reader = reader
        # (body bytes parsed after a read, that read's kernel stamp); what is already buffered
        # arrived with the headers
        self._reads: deque[tuple[int, int]] = deque([(reader.total_bytes, since_ns)])

    @classmethod
    def attach(cls, response: Any, since_ns: int) -> KernelStamps | None:
        # the response is the connection's protocol: its transport, and its count of body bytes
        transport = getattr(response, "transport", None)
        sock = getattr(transport, "_sock", None)
        reader = response
        if (not isinstance(sock, socket.socket) or not hasattr(transport, "_read_ready_cb")
                or not hasattr(reader, "total_bytes") or sock.type != socket.SOCK_STREAM):
            return None
        try:
            rxstamp.enable(sock)
        except OSError:
            return None
        stamps = cls(transport, sock, reader, since_ns)
        setattr(transport, "_read_ready_cb", stamps._read_ready)  # noqa: B010 - a private slot, on purpose
        return stamps

    def stamp_for(self, consumed: int) -> int | None:
        """Kernel arrival time of body byte `consumed` (1-based count of bytes read so far)."""
        reads = self._reads
        while len(reads) > 1 and reads[0][0] < consumed:
            reads.popleft()
        return reads[0][1] if reads and reads[0][0] >= consumed else None

    def _read_ready(self) -> None:
        # asyncio's _read_ready__data_received, with recvmsg for the kernel's stamp
        t = self._transport
        if t._conn_lost:
            return
        try:
            data, anc, _flags, _addr = self._sock.recvmsg(t.max_size, rxstamp.ANC_SPACE)
        except (BlockingIOError, InterruptedError):
            return
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as exc:
            t._fatal_error(exc, "Fatal read error on socket transport")
            return
        if not data:
            t._read_ready__on_eof()
            return
        rx_ns = rxstamp.rx_ns(anc)
        try:
            t._protocol.data_received(data)
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as exc:
            t._fatal_error(exc, "Fatal error: protocol.data_received() call failed.")
            return
        self._reads.append((self._reader.total_bytes, rx_ns or time.time_ns()))
