"""Probe packets for mtr (ICMP echo, UDP, TCP SYN) and parsing of what comes back.

Paris-traceroute style: every probe of one run carries the same flow fields (addresses, protocol,
ports, and for ICMP the checksum), so a router balancing flows over several links keeps the run on
one path. Probes are told apart by fields routers do not hash on: the ICMP sequence (its checksum
change undone by two payload bytes), the UDP checksum (steered by two payload bytes) and the TCP
sequence number. All three lie within the first 8 bytes of the transport header, which every ICMP
error quotes.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass
from typing import Literal

from netprobe.probes.icmp.packets import attach_bpf, bpf, fold, ones_sum, pass_icmp6_types

Mode = Literal["icmp", "udp", "tcp"]

ICMP_ECHO_REPLY, ICMP_UNREACH, ICMP_ECHO, ICMP_TIME_EXCEEDED = 0, 3, 8, 11
ICMP6_UNREACH, ICMP6_TIME_EXCEEDED, ICMP6_ECHO, ICMP6_ECHO_REPLY = 1, 3, 128, 129
PROTO_ICMP, PROTO_TCP, PROTO_UDP, PROTO_ICMP6 = 1, 6, 17, 58
TCP_SYN, TCP_RST, TCP_ACK = 0x02, 0x04, 0x10
PAYLOAD = 36  # bytes after the transport header: 64-byte IPv4 probes, as mtr's default


def pseudo_header(src: bytes, dst: bytes, proto: int, length: int) -> bytes:
    if len(src) == 4:
        return src + dst + struct.pack("!BBH", 0, proto, length)
    return src + dst + struct.pack("!I3xB", length, proto)


_ECHO_HEAD = struct.Struct("!BBHHHH")   # type, code, checksum, id, seq, payload word 0 (~seq)
_ECHO_TAIL = bytes(PAYLOAD - 2)
_echo_csums: dict[int, int] = {}        # ident -> the checksum every seq's probe shares


def icmp_echo(v6: bool, ident: int, seq: int) -> bytes:
    """Echo request whose checksum is the same for every seq: payload word 0 is ~seq. (So it is
    computed once per identifier; a probe costs one pack.)"""
    if v6:  # the kernel fills in the ICMPv6 checksum; seq + ~seq keeps it constant all the same
        return _ECHO_HEAD.pack(ICMP6_ECHO, 0, 0, ident, seq, ~seq & 0xFFFF) + _ECHO_TAIL
    csum = _echo_csums.get(ident)
    if csum is None:
        payload = struct.pack("!H", ~seq & 0xFFFF) + _ECHO_TAIL
        csum = _echo_csums[ident] = ~fold((ICMP_ECHO << 8) + ident + seq + ones_sum(payload)) & 0xFFFF
    return _ECHO_HEAD.pack(ICMP_ECHO, 0, csum, ident, seq, ~seq & 0xFFFF) + _ECHO_TAIL


def udp_probe(src: bytes, dst: bytes, sport: int, dport: int, want_csum: int) -> bytes:
    """UDP header + payload whose valid checksum is `want_csum` (1..0xfffe): two payload bytes steer it.

    Built whole and sent on a raw socket: a UDP socket's checksum is left to offload and only
    completed at the NIC (on a veth, never), so a router's quote of it would not carry our id."""
    length = 8 + PAYLOAD
    base = ones_sum(pseudo_header(src, dst, PROTO_UDP, length)) + sport + dport + length
    # checksum = ~(base + adj)  =>  adj = ~want - base  (one's complement arithmetic)
    adj = fold((~want_csum & 0xFFFF) + (~fold(base) & 0xFFFF))
    return struct.pack("!HHHHH", sport, dport, length, want_csum, adj) + bytes(PAYLOAD - 2)


def tcp_syn(src: bytes, dst: bytes, sport: int, dport: int, seq: int) -> bytes:
    """A bare SYN (no options); the checksum over the pseudo-header is ours for IPv4 and the kernel's
    for IPv6 (IPV6_CHECKSUM)."""
    header = bytearray(struct.pack("!HHIIBBHHH", sport, dport, seq, 0, 5 << 4, TCP_SYN, 64240, 0, 0))
    if len(src) == 4:
        csum = ~fold(ones_sum(pseudo_header(src, dst, PROTO_TCP, len(header))) + ones_sum(bytes(header)))
        struct.pack_into("!H", header, 16, csum & 0xFFFF)
    return bytes(header)


@dataclass(frozen=True, slots=True)
class Reply:
    """What one incoming packet says about one probe.

    `key` identifies the probe (see ProbeKey in engine), `dest` the address the probe was sent to,
    `kind` whether it expired at a router (`ttl`), reached the destination (`reached`) or was
    refused on the way (`unreach`)."""

    key: tuple[str, int, int]
    dest: bytes
    responder: bytes
    kind: Literal["ttl", "reached", "unreach"]


def _quoted(data: bytes, off: int, v6: bool) -> tuple[int, bytes, int] | None:
    """(protocol, destination, transport offset) of the packet an ICMP error quotes at `off`."""
    if v6:
        if len(data) < off + 48:
            return None
        return data[off + 6], data[off + 24 : off + 40], off + 40
    if len(data) < off + 28 or data[off] >> 4 != 4:
        return None
    ihl = (data[off] & 0x0F) * 4
    if len(data) < off + ihl + 8:
        return None
    return data[off + 9], data[off + 16 : off + 20], off + ihl


def _key_of(proto: int, data: bytes, t: int, v6: bool) -> tuple[str, int, int] | None:
    if proto in (PROTO_ICMP, PROTO_ICMP6):
        if data[t] != (ICMP6_ECHO if v6 else ICMP_ECHO):
            return None
        ident, seq = struct.unpack_from("!HH", data, t + 4)
        return ("icmp", ident, seq)
    if proto == PROTO_UDP:
        sport, _dport, _len, csum = struct.unpack_from("!HHHH", data, t)
        return ("udp", sport, csum)
    if proto == PROTO_TCP:
        sport, _dport, seq = struct.unpack_from("!HHI", data, t)
        return ("tcp", sport, seq)
    return None


def _transport(data: bytes, src: bytes, v6: bool, need: int) -> tuple[int, bytes] | None:
    """(offset of the transport header, source address) of a packet read from a raw socket: IPv4
    sockets see the IP header, IPv6 ones start at the transport header (the source comes apart)."""
    off = 0
    if not v6:
        if len(data) < 20:
            return None
        off, src = (data[0] & 0x0F) * 4, data[12:16]
    return (off, src) if len(data) >= off + need else None


def parse_icmp(data: bytes, src: bytes, v6: bool, ident: int) -> Reply | None:
    """An ICMP packet from a raw socket (IPv4: with its IP header; IPv6: from the ICMPv6 header)."""
    found = _transport(data, src, v6, 8)
    if found is None:
        return None
    off, src = found
    kind = data[off]
    if kind == (ICMP6_ECHO_REPLY if v6 else ICMP_ECHO_REPLY):
        rid, seq = struct.unpack_from("!HH", data, off + 4)
        return Reply(("icmp", rid, seq), src, src, "reached") if rid == ident else None
    if v6:
        verdict = {ICMP6_TIME_EXCEEDED: "ttl", ICMP6_UNREACH: "unreach"}.get(kind)
    else:
        verdict = {ICMP_TIME_EXCEEDED: "ttl", ICMP_UNREACH: "unreach"}.get(kind)
    if verdict is None:
        return None
    quoted = _quoted(data, off + 8, v6)
    if quoted is None:
        return None
    proto, dest, t = quoted
    key = _key_of(proto, data, t, v6)
    if key is None:
        return None
    code = data[off + 1]
    port_unreach = (v6 and code == 4) or (not v6 and code == 3)
    if verdict == "unreach" and port_unreach and src == dest:
        return Reply(key, dest, src, "reached")  # UDP probe at the destination's closed port
    return Reply(key, dest, src, "ttl" if verdict == "ttl" else "unreach")


def parse_tcp(data: bytes, src: bytes, v6: bool) -> Reply | None:
    """A SYN-ACK or RST from the destination answering one of our SYNs: ack = our seq + 1."""
    found = _transport(data, src, v6, 20)
    if found is None:
        return None
    off, src = found
    _sport, dport, _seq, ack = struct.unpack_from("!HHII", data, off)
    flags = data[off + 13]
    if not flags & TCP_RST and flags & (TCP_SYN | TCP_ACK) != (TCP_SYN | TCP_ACK):
        return None
    if not flags & TCP_ACK:
        return None
    return Reply(("tcp", dport, (ack - 1) & 0xFFFFFFFF), src, src, "reached")


def attach_icmp_filter(sock: socket.socket, v6: bool, ident: int) -> None:
    """Pass errors (time exceeded, unreachable) and echo replies with our identifier, nothing else:
    the agent's ICMP engine receives thousands of other echo replies on the same host."""
    x = 0 if v6 else 1
    reply, exceeded, unreach = ((ICMP6_ECHO_REPLY, ICMP6_TIME_EXCEEDED, ICMP6_UNREACH) if v6
                                else (ICMP_ECHO_REPLY, ICMP_TIME_EXCEEDED, ICMP_UNREACH))
    prog = [bpf(0xB1, 0, 0, 0)] if x else []       # ldxb 4*([0]&0xf): X = IPv4 header length
    load_type, load_id = (0x50, 0x48) if x else (0x30, 0x28)  # ldb/ldh [x+k] or [k]
    prog += [
        bpf(load_type, 0, 0, 0),
        bpf(0x15, 4, 0, exceeded),          # jeq exceeded -> accept
        bpf(0x15, 3, 0, unreach),           # jeq unreach  -> accept
        bpf(0x15, 0, 3, reply),             # jeq reply ? next : drop
        bpf(load_id, 0, 0, 4),
        bpf(0x15, 0, 1, ident),
        bpf(0x06, 0, 0, 0xFFFF),
        bpf(0x06, 0, 0, 0),
    ]
    attach_bpf(sock, prog)
    if v6:
        pass_icmp6_types(sock, reply, exceeded, unreach)


def attach_tcp_filter(sock: socket.socket, v6: bool, port: int) -> None:
    """A raw TCP socket sees a copy of every TCP segment on the host; keep only those to `port`."""
    if v6:
        prog = [bpf(0x28, 0, 0, 2)]                     # ldh [2]    destination port
    else:
        prog = [bpf(0xB1, 0, 0, 0), bpf(0x48, 0, 0, 2)]  # X = IHL; ldh [x+2]
    prog += [bpf(0x15, 0, 1, port), bpf(0x06, 0, 0, 0xFFFF), bpf(0x06, 0, 0, 0)]
    attach_bpf(sock, prog)


def attach_drop_all(sock: socket.socket) -> None:
    attach_bpf(sock, [bpf(0x06, 0, 0, 0)])
