"""ICMP echo packets: building, parsing, and the kernel filters that keep other pingers' replies out."""

from __future__ import annotations

import ctypes
import socket
import struct

ECHO_REQUEST_V4 = 8
ECHO_REPLY_V4 = 0
ECHO_REQUEST_V6 = 128
ECHO_REPLY_V6 = 129
COOKIE_LEN = 8

_HDR = struct.Struct("!BBHHH")

SO_ATTACH_FILTER = 26
ICMP6_FILTER = 1


def fold(total: int) -> int:
    """Fold carries back in: the one's-complement sum of RFC 1071."""
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def ones_sum(data: bytes) -> int:
    """One's-complement sum of 16-bit words (odd length padded), not yet inverted into a checksum."""
    if len(data) % 2:
        data += b"\0"
    return fold(sum(struct.unpack(f"!{len(data) // 2}H", data)))


def make_payload(cookie: bytes, size: int) -> bytes:
    """`size` bytes starting with the engine's cookie (how foreign replies with our id are told apart)."""
    body = cookie + bytes(i & 0xFF for i in range(max(0, size - len(cookie))))
    return body[:size] if size >= len(cookie) else cookie


def echo_request(v6: bool, ident: int, seq: int, payload: bytes, psum: int) -> bytes:
    """An echo request; v4 checksum computed here, ICMPv6's by the kernel (needs the pseudo-header)."""
    if v6:
        return _HDR.pack(ECHO_REQUEST_V6, 0, 0, ident, seq) + payload
    csum = ~fold(psum + (ECHO_REQUEST_V4 << 8) + ident + seq) & 0xFFFF
    return _HDR.pack(ECHO_REQUEST_V4, 0, csum, ident, seq) + payload


def bpf(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k)


def attach_bpf(sock: socket.socket, prog: list[bytes]) -> None:
    code = b"".join(prog)
    buf = ctypes.create_string_buffer(code, len(code))
    # the kernel copies the program, so `buf` may go once setsockopt returns
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, struct.pack("HL", len(prog), ctypes.addressof(buf)))


def pass_icmp6_types(sock: socket.socket, *types: int) -> None:
    """ICMP6_FILTER: a set bit blocks that type; pass only `types` (no NDP, no others' requests)."""
    words = [0xFFFFFFFF] * 8
    for t in types:
        words[t >> 5] &= ~(1 << (t & 31)) & 0xFFFFFFFF
    sock.setsockopt(socket.IPPROTO_ICMPV6, ICMP6_FILTER, struct.pack("8I", *words))


def attach_reply_filter(sock: socket.socket, v6: bool, ident: int) -> None:
    """Classic BPF: let only echo replies carrying our identifier reach this socket.

    On a raw socket every ICMP packet on the host is delivered to every raw listener; at 1,000
    targets beside another pinger that doubles the work, so the kernel drops the rest for us."""
    # raw ICMPv6 sockets see the packet from the ICMPv6 header on, raw ICMPv4 sockets the IP header first
    prog = [] if v6 else [bpf(0xB1, 0, 0, 0)]           # ldxb 4*([0]&0xf): X = IPv4 header length
    load_type, load_id = (0x30, 0x28) if v6 else (0x50, 0x48)  # ldb/ldh [k] or [x+k]
    prog += [
        bpf(load_type, 0, 0, 0),                                           # type
        bpf(0x15, 0, 3, ECHO_REPLY_V6 if v6 else ECHO_REPLY_V4),           # jeq echo reply
        bpf(load_id, 0, 0, 4),                                             # identifier
        bpf(0x15, 0, 1, ident),                                            # jeq #ident
        bpf(0x06, 0, 0, 0xFFFF),                                           # ret accept
        bpf(0x06, 0, 0, 0),                                                # ret drop
    ]
    attach_bpf(sock, prog)
    if v6:
        pass_icmp6_types(sock, ECHO_REPLY_V6)
