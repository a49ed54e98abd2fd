"""The owd wire format (docs/probes.md): one fixed 88-byte layout for requests and replies, so a reply is
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

import functools
import hashlib
import hmac
import struct
from enum import IntEnum
from typing import NamedTuple

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


_KINDS = {int(k): k for k in Kind}


class BadPacket(ValueError):
    """Not a well-formed, authentic owd packet; `reason` says which check failed (for counters)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Packet(NamedTuple):
    """A tuple, not a frozen dataclass: made twice per request on the reflector's path, and a tuple is
    made much faster (a frozen dataclass sets each field through object.__setattr__)."""

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


@functools.lru_cache(maxsize=8192)
def _keyed(key: bytes) -> hmac.HMAC:
    # the HMAC's state once the key's two padded blocks are hashed; copying it per packet costs half
    # of hmac.digest's one-shot, which hashes them again every time
    return hmac.new(key, digestmod=hashlib.sha256)


def mac(key: bytes, body: bytes) -> bytes:
    h = _keyed(key).copy()
    h.update(body)
    return h.digest()[:MAC_SIZE]


def encode(p: Packet, key: bytes) -> bytes:
    body = _BODY.pack(MAGIC, VERSION, p.kind, 0, p.key_id, p.session, p.seq, 0, p.t1, p.t2, p.t3,
                      p.received, p.reordered, p.duplicates, 0)
    return body + mac(key, body)


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
    body = data[:_BODY.size]
    if not hmac.compare_digest(data[_BODY.size:], mac(key, body)):
        raise BadPacket("mac")
    (_, _, kind, _, kid, session, seq, _, t1, t2, t3, received, reordered, duplicates,
     _) = _BODY.unpack(body)
    k = _KINDS.get(kind)                # a dict, not Kind(kind): an enum call costs far more
    if k is None:
        raise BadPacket("kind")
    return Packet(k, kid, session, seq, t1, t2, t3, received, reordered, duplicates)


__all__ = ["SIZE", "BadPacket", "Kind", "Packet", "decode", "derive_key", "encode", "key_id",
           "peek_key_id"]
