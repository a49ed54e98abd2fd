"""The owd reflector's rules on datagrams (docs/probes.md): authentic requests only, replies never larger,
duplicates and reordering counted, memory and rate bounded."""

from __future__ import annotations

import hashlib
import hmac
import os

import pytest

from netprobe.probes.owd import packets
from netprobe.probes.owd.packets import BadPacket, Kind, Packet
from netprobe.probes.owd.udp_reflector import MAX_SEQ, Limits, Reflector

KEY = packets.derive_key("tok")
KID = packets.key_id(KEY)


def req(seq: int, session: int = 1, kind: Kind = Kind.REQUEST, key: bytes = KEY) -> bytes:
    return packets.encode(Packet(kind, packets.key_id(key), session, seq, 1_000 + seq), key)


def test_codec_round_trip_and_every_check() -> None:
    p = Packet(Kind.REPLY, KID, 2**64 - 1, 7, 1, 2, 3, 4, 5, 6)
    data = packets.encode(p, KEY)
    assert len(data) == packets.SIZE == 88 and packets.decode(data, KEY) == p
    flipped = bytearray(data)
    flipped[30] ^= 1
    for bad, reason in ((bytes(flipped), "mac"), (data[:-1], "size"), (data + b"\0", "size"),
                        (b"XPOW" + data[4:], "magic"), (data, "mac")):
        with pytest.raises(BadPacket) as err:
            packets.decode(bad, KEY if bad is not data else packets.derive_key("other"))
        assert err.value.reason == reason
    odd = packets.encode(Packet(Kind.REQUEST, KID, 1, 1, 1), KEY)
    raw = bytearray(odd[:72])
    raw[5] = 9                                   # an unknown kind, correctly signed
    signed = bytes(raw) + hmac.new(KEY, bytes(raw), hashlib.sha256).digest()[:16]
    with pytest.raises(BadPacket, match="kind"):
        packets.decode(signed, KEY)


def test_replies_answer_requests_exactly_their_size() -> None:
    r = Reflector({KID: KEY})
    out = r.handle(req(0), t2=5_000, now=0.0)
    assert out is not None and len(out) == len(req(0))
    p = packets.decode(out, KEY)
    assert (p.kind, p.seq, p.t1, p.t2, p.received) == (Kind.REPLY, 0, 1_000, 5_000, 1)
    assert p.t3 > 0                              # the reflector's own send time


def test_duplicates_are_counted_not_answered_and_reordering_is_counted() -> None:
    r = Reflector({KID: KEY})
    assert r.handle(req(0), 1, 0.0) and r.handle(req(2), 1, 0.0) and r.handle(req(1), 1, 0.0)
    assert r.handle(req(1), 1, 0.0) is None
    status = r.handle(req(0, kind=Kind.STATUS), 1, 0.0)
    assert status is not None
    p = packets.decode(status, KEY)
    assert (p.kind, p.received, p.reordered, p.duplicates) == (Kind.STATUS_REPLY, 3, 1, 1)


def test_hostile_datagrams_are_counted_and_dropped() -> None:
    r = Reflector({KID: KEY})
    other = packets.derive_key("other")
    forged = bytearray(req(0))
    forged[-1] ^= 0xFF
    cases = [os.urandom(88), b"", os.urandom(2000), req(0, key=other), bytes(forged), req(MAX_SEQ),
             packets.encode(Packet(Kind.REPLY, KID, 1, 0, 0), KEY)]
    assert all(r.handle(c, 1, 0.0) is None for c in cases)
    assert r.replies == 0 and sum(r.bad.values()) == len(cases)
    assert r.bad["key"] == 1 and r.bad["mac"] == 1 and r.bad["seq"] == 1 and r.bad["kind"] == 1


def test_a_replayed_request_is_never_answered_twice() -> None:
    r = Reflector({KID: KEY}, Limits(max_age_s=600.0, session_idle_s=660.0))
    captured = req(0)                                            # sent at t1 = 1,000 ns
    assert r.handle(captured, t2=2_000, now=0.0) is not None
    # within the window the session still knows it: a duplicate, counted, not answered
    assert r.handle(captured, t2=2_000 + 300 * 10**9, now=300.0) is None
    assert packets.decode(r.handle(req(0, kind=Kind.STATUS), 2_000, 300.0) or b"", KEY).duplicates == 1
    # later, when the session may be gone, it is stale: refused by its own send time
    assert r.handle(captured, t2=2_000 + 700 * 10**9, now=700.0) is None and r.bad["stale"] == 1
    # a request from a clock far ahead alike
    assert r.handle(req(0, session=2), t2=1_000 - 601 * 10**9, now=700.0) is None and r.bad["stale"] == 2
    assert Limits().session_idle_s > Limits().max_age_s     # the defaults keep a session past the window


def test_sessions_and_rate_are_bounded() -> None:
    r = Reflector({KID: KEY}, Limits(max_sessions=8, session_idle_s=10.0, rate_pps=100.0, burst=50.0))
    for s in range(20):
        r.handle(req(0, session=s), 1, 0.0)
    assert len(r.sessions) == 8 and r.bad["rate"] == 0
    answered = sum(r.handle(req(i, session=99), 1, 0.0) is not None for i in range(1, 60))
    assert answered == 30 and r.bad["rate"] == 29           # the burst of 50, 20 already used
    r.handle(req(0, session=100), 1, 100.0)                 # much later: the idle ones are gone
    assert list(r.sessions) == [(KID, 100)]
    assert r.handle(req(1, session=100), 1, 100.5) is not None      # the bucket refilled meanwhile
