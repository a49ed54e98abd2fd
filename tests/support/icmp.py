"""ICMP echo packets read back, to check what netprobe.probes.icmp.packets builds."""

from __future__ import annotations

import struct

from netprobe.probes.icmp.packets import COOKIE_LEN

_ID_SEQ = struct.Struct("!HH")


def parse_reply(data: bytes, offset: int, want_type: int) -> tuple[int, int, bytes] | None:
    """(identifier, sequence, cookie) of an echo reply starting at `offset`, or None for anything else."""
    if len(data) < offset + 8 + COOKIE_LEN or data[offset] != want_type:
        return None
    ident, seq = _ID_SEQ.unpack_from(data, offset + 4)
    return ident, seq, data[offset + 8 : offset + 8 + COOKIE_LEN]
