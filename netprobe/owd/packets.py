"""The owd wire format (DESIGN §9): one fixed 88-byte layout for requests and replies, so a reply is
never larger than the request it answers (no amplification), authenticated with a truncated
HMAC-SHA256 under the agent's reflector key.

    0  magic "NPOW"        4      40  t2 reflector receive ns  u64
    4  version             u8     48  t3 reflector send ns     u64
    5  kind                u8     56  received in session      u32
    6  reserved            u16    60  reordered (forward)      u32
    8  key id              8      64  duplicates (forward)     u32
   16  session             u64    68  reserved                 u32
   24  seq                 u32    72  HMAC-SHA256[:16] of 0–71
   28  reserved            u32
   32  t1 agent send ns    u64

A request carries zeros where the reply's fields go. The key id (the first 8 bytes of SHA-256 of the
key) lets the reflector find the key without the agent's id on the wire. Times are CLOCK_REALTIME ns.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from dataclasses import dataclass
from enum import IntEnum

MAGIC = b"NPOW"
VERSION = 1
_BODY = struct.Struct("!4sBBH8sQIIQQQIIII")
MAC_SIZE = 16
SIZE = _BODY.size + MAC_SIZE            # 88
KEY_CONTEXT = b"netprobe owd key v1"


class Kind(IntEnum):
    REQUEST = 1
    REPLY = 2
    STATUS = 3          # "how many of this session's requests have you seen?" — not a sample
    STATUS_REPLY = 4


class BadPacket(ValueError):
    """Not a well-formed, authentic owd packet; `reason` says which check failed (for counters)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Packet:
    kind: Kind
    key_id: bytes
    session: int
    seq: int
    t1: int
    t2: int = 0
    t3: int = 0
    received: int = 0
    reordered: int = 0
    duplicates: int = 0


def derive_key(token: str) -> bytes:
    """The owd key of an agent's reflector token: the reflector stores this, never the token."""
    return hmac.new(token.encode(), KEY_CONTEXT, hashlib.sha256).digest()


def key_id(key: bytes) -> bytes:
    return hashlib.sha256(key).digest()[:8]


def encode(p: Packet, key: bytes) -> bytes:
    body = _BODY.pack(MAGIC, VERSION, p.kind, 0, p.key_id, p.session, p.seq, 0, p.t1, p.t2, p.t3,
                      p.received, p.reordered, p.duplicates, 0)
    return body + hmac.digest(key, body, "sha256")[:MAC_SIZE]    # one-shot: OpenSSL's, no HMAC object


def peek_key_id(data: bytes) -> bytes:
    """The key id of a packet of the right size and magic, before its MAC is checked."""
    if len(data) != SIZE:
        raise BadPacket("size")
    if data[:4] != MAGIC or data[4] != VERSION:
        raise BadPacket("magic")
    return bytes(data[8:16])


def decode(data: bytes, key: bytes) -> Packet:
    """The packet, once its size, magic, version, kind and MAC are right."""
    peek_key_id(data)
    body, mac = data[:_BODY.size], data[_BODY.size:]
    if not hmac.compare_digest(mac, hmac.digest(key, body, "sha256")[:MAC_SIZE]):
        raise BadPacket("mac")
    (_, _, kind, _, kid, session, seq, _, t1, t2, t3, received, reordered, duplicates,
     _) = _BODY.unpack(body)
    try:
        k = Kind(kind)
    except ValueError:
        raise BadPacket("kind") from None
    return Packet(k, kid, session, seq, t1, t2, t3, received, reordered, duplicates)


__all__ = ["SIZE", "BadPacket", "Kind", "Packet", "decode", "derive_key", "encode", "key_id",
           "peek_key_id"]
