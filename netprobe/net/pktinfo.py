"""The destination address of a datagram received on a wildcard-bound UDP socket (IP_PKTINFO,
IPV6_RECVPKTINFO), and the ancillary data that sends the reply from that same address."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterable

IP_PKTINFO = 8                                  # <linux/in.h>; Python 3.11 does not export it
_IN_PKTINFO = struct.Struct("i4s4s")            # ipi_ifindex, ipi_spec_dst, ipi_addr
_IN6_PKTINFO = struct.Struct("16sI")            # ipi6_addr, ipi6_ifindex
ANC_SPACE = socket.CMSG_SPACE(_IN6_PKTINFO.size)
Cmsg = tuple[int, int, bytes]


def enable(sock: socket.socket) -> bool:
    """Ask for each datagram's destination; False where the kernel cannot say (then replies go out
    from the address the kernel picks)."""
    try:
        if sock.family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_RECVPKTINFO, 1)
        else:
            sock.setsockopt(socket.IPPROTO_IP, IP_PKTINFO, 1)
    except OSError:
        return False
    return True


def reply_from(ancdata: Iterable[Cmsg]) -> list[Cmsg]:
    """sendmsg's ancillary data to answer from the destination of the datagram `ancdata` came with
    (the interface left to routing, so any route back serves); [] when it carried none."""
    for level, kind, data in ancdata:
        if level == socket.IPPROTO_IP and kind == IP_PKTINFO and len(data) >= _IN_PKTINFO.size:
            _, _, dst = _IN_PKTINFO.unpack_from(data)
            return [(socket.IPPROTO_IP, IP_PKTINFO, _IN_PKTINFO.pack(0, dst, bytes(4)))]
        if level == socket.IPPROTO_IPV6 and kind == socket.IPV6_PKTINFO and len(data) >= _IN6_PKTINFO.size:
            dst, ifindex = _IN6_PKTINFO.unpack_from(data)
            # a link-local destination needs its interface; any other is left to routing
            keep = ifindex if dst[:2] == b"\xfe\x80" else 0
            return [(socket.IPPROTO_IPV6, socket.IPV6_PKTINFO, _IN6_PKTINFO.pack(dst, keep))]
    return []
