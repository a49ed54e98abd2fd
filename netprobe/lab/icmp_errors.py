"""ICMP Time Exceeded messages the relay sends on behalf of emulated router hops."""

from __future__ import annotations

import struct

from netprobe.probes.icmp.packets import ones_sum

_V6_MIN_MTU = 1280


def inet_checksum(data: bytes) -> int:
    return ~ones_sum(data) & 0xFFFF


def is_icmp_error_v4(packet: bytes) -> bool:
    """RFC 1812: never answer an ICMP error (or a non-first fragment) with another."""
    if packet[9] != 1:
        return (int.from_bytes(packet[6:8], "big") & 0x1FFF) != 0
    ihl = (packet[0] & 0x0F) * 4
    return len(packet) <= ihl or packet[ihl] not in (0, 8, 13, 14)


def is_icmp_error_v6(packet: bytes) -> bool:
    return packet[6] == 58 and len(packet) > 40 and packet[40] < 128


def time_exceeded_v4(packet: bytes, source: bytes, ident: int) -> bytes:
    """Type 11 code 0 from `source` back to the packet's sender, quoting its header + 8 bytes."""
    ihl = (packet[0] & 0x0F) * 4
    quote = packet[: ihl + 8]
    icmp = bytearray(struct.pack("!BBHI", 11, 0, 0, 0) + quote)
    struct.pack_into("!H", icmp, 2, inet_checksum(bytes(icmp)))
    total = 20 + len(icmp)
    header = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0xC0, total, ident & 0xFFFF, 0, 64, 1, 0,
                                   source, packet[12:16]))
    struct.pack_into("!H", header, 10, inet_checksum(bytes(header)))
    return bytes(header) + bytes(icmp)


def time_exceeded_v6(packet: bytes, source: bytes) -> bytes:
    """ICMPv6 type 3 code 0, quoting as much of the packet as fits the minimum MTU (RFC 4443)."""
    quote = packet[: _V6_MIN_MTU - 48]
    dest = packet[8:24]
    body = bytearray(struct.pack("!BBHI", 3, 0, 0, 0) + quote)
    pseudo = source + dest + struct.pack("!I3xB", len(body), 58)
    struct.pack_into("!H", body, 2, inet_checksum(pseudo + bytes(body)))
    header = struct.pack("!IHBB16s16s", 6 << 28, len(body), 58, 64, source, dest)
    return header + bytes(body)
