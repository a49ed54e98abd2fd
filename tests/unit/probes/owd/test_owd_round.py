"""owd end to end over loopback sockets: the agent's round against the real reflector, and the
figures' rules by hand (docs/probes.md)."""

from __future__ import annotations

import socket

import pytest

from netprobe.probes.owd import packets
from netprobe.probes.owd.client import Exchange, Reply, exchange
from netprobe.probes.owd.figures import figures
from netprobe.probes.owd.udp_reflector import Reflector, ReflectorSocket, bind

KEY = packets.derive_key("agent-token")
KEYS = {packets.key_id(KEY): KEY}


class Dropping(Reflector):
    """The real reflector, but requests of `lose_fwd` are never seen and replies to `lose_ret` never
    leave: loss in a known direction, through the same sockets."""

    def __init__(self, lose_fwd: set[int], lose_ret: set[int]) -> None:
        super().__init__(KEYS)
        self.lose_fwd, self.lose_ret = lose_fwd, lose_ret

    def handle(self, data: bytes, t2: int, now: float) -> bytes | None:
        p = packets.decode(data, KEY)
        if p.kind is packets.Kind.REQUEST and p.seq in self.lose_fwd:
            return None
        reply = super().handle(data, t2, now)
        return None if p.kind is packets.Kind.REQUEST and p.seq in self.lose_ret else reply


def _has_v6() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
async def test_loopback_round_sees_everything(host: str) -> None:
    if host == "::1" and not _has_v6():
        pytest.fail("no IPv6 loopback on this machine")
    refl = Reflector(KEYS)
    srv = ReflectorSocket(refl, bind(host, 0))
    try:
        x = await exchange(srv.address, KEY, count=20, interval=0.005, timeout=1.0)
    finally:
        srv.close()
    f = figures(x)
    assert (f.sent, f.received, f.loss_pct, f.fwd_loss_pct, f.ret_loss_pct) == (20, 20, 0.0, 0.0, 0.0)
    assert x.status_answered and x.seen_by_reflector == 20 and x.bad == 0
    assert f.rtt is not None and 0.0 <= f.rtt.min <= f.rtt.p50 < 50.0
    assert f.fwd_delay_var is not None and f.fwd_delay_var.p50 >= 0.0
    assert f.fwd_ms is None and f.ret_ms is None            # clocks not declared synchronised
    assert f.reordered_fwd == f.reordered_ret == f.duplicates_fwd == f.duplicates_ret == 0
    assert refl.replies == 21 and not refl.bad             # 20 replies and the status


@pytest.mark.parametrize(("wildcard", "asked"),
                         [("0.0.0.0", "127.0.0.2"), ("::", "::1"), ("::", "127.0.0.3")])
async def test_a_wildcard_reflector_answers_from_the_address_asked(wildcard: str, asked: str) -> None:
    """Bound to every address, the reflector replies from the one the request went to: the agent's
    socket is connected there and drops a reply from any other (127.0.0.1 would be the kernel's pick
    for 127.0.0.2; an IPv4 request to a dual-stack socket alike)."""
    refl = Reflector(KEYS)
    srv = ReflectorSocket(refl, bind(wildcard, 0))
    try:
        x = await exchange((asked, srv.address[1]), KEY, count=5, interval=0.005, timeout=1.0)
    finally:
        srv.close()
    assert len(x.replies) == 5 and x.status_answered and x.bad == 0 and x.error is None


async def test_loss_is_told_apart_by_direction() -> None:
    refl = Dropping(lose_fwd={2, 5, 19}, lose_ret={7, 8})   # 19: the last request, after every reply
    srv = ReflectorSocket(refl, bind("127.0.0.1", 0))
    try:
        x = await exchange(srv.address, KEY, count=20, interval=0.002, timeout=0.3)
    finally:
        srv.close()
    f = figures(x)
    assert (f.sent, f.received) == (20, 15)
    assert f.fwd_loss_pct == pytest.approx(15.0) and f.ret_loss_pct == pytest.approx(10.0)
    assert f.fwd_loss_pct + f.ret_loss_pct == pytest.approx(f.loss_pct)
    assert [s is None for s in f.samples_ms] == [i in {2, 5, 19, 7, 8} for i in range(20)]


async def test_without_the_status_reply_the_tail_counts_as_forward_loss() -> None:
    # The reflector's counts in the replies stop at the last reply: requests after it are unknown.
    x = Exchange(sent=4, seen_by_reflector=2, replies=[Reply(0, 0, 5, 6, 11), Reply(1, 10, 15, 16, 21)])
    f = figures(x)
    assert (f.fwd_loss_pct, f.ret_loss_pct, f.loss_pct) == (50.0, 0.0, 50.0)


def test_clock_offset_cancels_in_delay_variation() -> None:
    ms = 1_000_000

    def round_with(offset: int) -> Exchange:
        # forward 10, 12, 11 ms; reflector holds 1 ms; return 20, 20, 23 ms; its clock `offset` ahead
        legs = [(10, 20), (12, 20), (11, 23)]
        replies = []
        for seq, (fwd, ret) in enumerate(legs):
            t1 = seq * 100 * ms
            t2 = t1 + fwd * ms + offset
            t3 = t2 + 1 * ms
            replies.append(Reply(seq, t1, t2, t3, t3 - offset + ret * ms))
        return Exchange(sent=3, seen_by_reflector=3, replies=replies)

    a, b = figures(round_with(0), clock_sync=True), figures(round_with(7_000 * ms))
    for f in (a, b):
        assert f.fwd_delay_var is not None and f.ret_delay_var is not None and f.rtt is not None
        assert (f.fwd_delay_var.p50, f.fwd_delay_var.max) == pytest.approx((1.0, 2.0))
        assert (f.ret_delay_var.p50, f.ret_delay_var.max) == pytest.approx((0.0, 3.0))
        assert f.rtt.min == pytest.approx(30.0) and f.rtt.max == pytest.approx(34.0)
    assert (a.fwd_ms, a.ret_ms) == pytest.approx((11.0, 20.0))
    assert b.fwd_ms is None


def test_return_reordering_and_duplicates_from_arrival_order() -> None:
    r = [Reply(0, 0, 1, 2, 10), Reply(2, 2, 3, 6, 11), Reply(1, 1, 2, 4, 12), Reply(1, 1, 2, 4, 13)]
    f = figures(Exchange(sent=3, seen_by_reflector=3, replies=r))
    assert (f.received, f.reordered_ret, f.duplicates_ret, f.loss_pct) == (3, 1, 1, 0.0)


async def test_a_wrong_key_gets_no_reply_and_is_counted() -> None:
    refl = Reflector(KEYS)
    srv = ReflectorSocket(refl, bind("127.0.0.1", 0))
    try:
        x = await exchange(srv.address, packets.derive_key("someone else"), count=3, interval=0.001,
                           timeout=0.2)
    finally:
        srv.close()
    assert x.replies == [] and not x.status_answered
    assert refl.bad["key"] == 6 and refl.replies == 0       # 3 requests and 3 status tries
