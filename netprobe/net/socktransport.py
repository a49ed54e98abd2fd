"""A plain TCP connection's asyncio transport, read with recvmsg so a read can carry the kernel's
receive stamp (netprobe.sse.kstamps).

The event loop's own transport reads inside the loop: asyncio's in a private Python callback that
kstamps used to swap, uvloop's in C where nothing can be swapped. This one is the small part of
asyncio's selector transport that netprobe.net.http1 uses (one request and its response per
connection), on `add_reader`/`add_writer`, so it behaves the same on either loop. TLS connections
keep the loop's transport (asyncio's never gave their reads a stamp either).
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable
from typing import Any

log = logging.getLogger("netprobe.net")

MAX_READ = 256 * 1024  # asyncio's selector transport reads up to this much at a time

AncData = list[tuple[int, int, bytes]]


class SocketTransport(asyncio.Transport):
    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket,
                 protocol: asyncio.Protocol) -> None:
        super().__init__()
        self._loop, self._sock, self._protocol = loop, sock, protocol
        self._fd = sock.fileno()
        self._wbuf = bytearray()
        self._closing = False      # close() or abort(): no more reads or writes accepted
        self._lost = False         # connection_lost is scheduled
        self._paused = False
        # set by netprobe.sse.kstamps: recvmsg's ancillary buffer size, and a call after each
        # data_received with that read's ancillary data
        self.anc_size = 0
        self.after_read: Callable[[AncData], None] | None = None
        sock.setblocking(False)
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as asyncio's and uvloop's
        self._info: dict[str, Any] = {"socket": sock, "sockname": sock.getsockname()}
        try:
            self._info["peername"] = sock.getpeername()
        except OSError:
            self._info["peername"] = None
        protocol.connection_made(self)
        loop.add_reader(self._fd, self._read_ready)

    # --- reading ----------------------------------------------------------------------------------

    def _read_ready(self) -> None:
        if self._closing:
            return
        anc: AncData = []
        try:
            if self.anc_size:
                data, anc, _flags, _addr = self._sock.recvmsg(MAX_READ, self.anc_size)
            else:
                data = self._sock.recv(MAX_READ)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._force_close(exc)
            return
        if not data:
            self._loop.remove_reader(self._fd)
            if not self._protocol.eof_received():
                self.close()
            return
        self._protocol.data_received(data)
        if self.after_read is not None:
            self.after_read(anc)

    def pause_reading(self) -> None:
        if not self._closing and not self._paused:
            self._paused = True
            self._loop.remove_reader(self._fd)

    def resume_reading(self) -> None:
        if not self._closing and self._paused:
            self._paused = False
            self._loop.add_reader(self._fd, self._read_ready)

    def is_reading(self) -> bool:
        return not self._closing and not self._paused

    # --- writing ----------------------------------------------------------------------------------

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._closing:
            return
        if not self._wbuf:
            try:
                n = self._sock.send(data)
            except (BlockingIOError, InterruptedError):
                n = 0
            except OSError as exc:
                self._force_close(exc)
                return
            if n == len(data):
                return
            data = memoryview(data)[n:]
            self._loop.add_writer(self._fd, self._write_ready)
        self._wbuf += data

    def _write_ready(self) -> None:
        try:
            n = self._sock.send(self._wbuf)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._force_close(exc)
            return
        del self._wbuf[:n]
        if not self._wbuf:
            self._loop.remove_writer(self._fd)
            if self._closing:
                self._lose(None)

    def get_write_buffer_size(self) -> int:
        return len(self._wbuf)

    def can_write_eof(self) -> bool:
        return False

    # --- closing ----------------------------------------------------------------------------------

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        """Close once what is buffered has been written (asyncio's close)."""
        if self._closing:
            return
        self._closing = True
        self._loop.remove_reader(self._fd)
        if not self._wbuf:
            self._lose(None)

    def abort(self) -> None:
        self._force_close(None)

    def _force_close(self, exc: Exception | None) -> None:
        if self._lost:
            return
        if exc is not None:
            log.debug("connection to %s failed: %s", self._info["peername"], exc)
        self._closing = True
        self._wbuf.clear()
        self._loop.remove_reader(self._fd)
        self._loop.remove_writer(self._fd)
        self._lose(exc)

    def _lose(self, exc: Exception | None) -> None:
        if self._lost:
            return
        self._lost = True
        self._loop.remove_writer(self._fd)
        self._loop.call_soon(self._connection_lost, exc)

    def _connection_lost(self, exc: Exception | None) -> None:
        try:
            self._protocol.connection_lost(exc)
        finally:
            self._sock.close()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._info.get(name, default)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._protocol

    def set_protocol(self, protocol: Any) -> None:
        self._protocol = protocol
