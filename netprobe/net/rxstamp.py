"""Kernel receive timestamps (SO_TIMESTAMPNS): the moment a packet arrived, whatever the event loop
was doing then. Shared by the ICMP engine, the mtr engine and the SSE body reader."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterable

SO_TIMESTAMPNS = 35  # SO_TIMESTAMPNS_OLD; same layout as the new one on 64-bit
_TS = struct.Struct("qq")
ANC_SPACE = socket.CMSG_SPACE(_TS.size)  # recvmsg's ancbufsize for the stamp


def enable(sock: socket.socket) -> None:
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)


def rx_ns(ancdata: Iterable[tuple[int, int, bytes]]) -> int:
    """CLOCK_REALTIME ns of the stamp among recvmsg's ancillary data; 0 when there is none."""
    if type(ancdata) is list and len(ancdata) == 1:  # the usual case: the stamp alone
        level, kind, cdata = ancdata[0]
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
            sec, nsec = _TS.unpack_from(cdata)
            stamp: int = sec * 1_000_000_000 + nsec
            return stamp
    for level, kind, cdata in ancdata:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
            sec, nsec = _TS.unpack_from(cdata)
            return int(sec * 1_000_000_000 + nsec)
    return 0
