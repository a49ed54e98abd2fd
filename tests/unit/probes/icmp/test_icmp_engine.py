"""The ICMP engine through real sockets on loopback: figures, matching, both socket kinds, v4 and v6."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from typing import Any

import pytest

from netprobe.probes.icmp import packets
from netprobe.probes.icmp.engine import IcmpEngine
from tests.support.icmp import parse_reply

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="raw ICMP sockets need root")


@pytest.mark.parametrize("address", ["127.0.0.1", "::1"])
async def test_loopback_round(address: str) -> None:
    engine = IcmpEngine()
    try:
        out = await engine.ping(address, count=10, interval=0.01, timeout=1.0)
    finally:
        engine.close()
    assert out.sent == 10
    assert all(s is not None and 0 < s < 20 for s in out.samples), out  # loopback; lab tests check accuracy
    assert out.duplicates == 0 and out.late == 0 and out.error_kind is None


async def test_many_concurrent_rounds_share_one_socket() -> None:
    engine = IcmpEngine()
    try:
        hosts = [f"127.0.{i // 250}.{i % 250 + 1}" for i in range(200)]
        outs = await asyncio.gather(*(engine.ping(h, count=3, interval=0.05, timeout=1.0) for h in hosts))
        assert len(engine._socks) == 1
    finally:
        engine.close()
    assert all(o.sent == 3 and None not in o.samples for o in outs)


async def test_dgram_ping_sockets_give_the_same_figures() -> None:
    """The unprivileged fallback (ping sockets) path, forced, with the group range opened for the test."""
    path = "/proc/sys/net/ipv4/ping_group_range"
    old = open(path).read().strip()
    open(path, "w").write("0 2147483647")
    engine = IcmpEngine(kind="dgram")
    try:
        out = await engine.ping("127.0.0.1", count=5, interval=0.01, timeout=1.0)
        assert engine.socket_kind() == "dgram"
    finally:
        engine.close()
        open(path, "w").write(old)
    assert out.sent == 5 and None not in out.samples


async def test_foreign_flood_pinger_changes_nothing() -> None:
    """An iputils `ping -f` on the same host and target: its replies never enter our figures."""
    flood = subprocess.Popen(["ping", "-f", "-c", "20000", "-q", "127.0.0.1"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    engine = IcmpEngine()
    try:
        await asyncio.sleep(0.2)
        out = await engine.ping("127.0.0.1", count=50, interval=0.01, timeout=1.0)
    finally:
        engine.close()
        flood.kill()
        flood.wait()
    assert out.sent == 50
    assert None not in out.samples
    assert out.duplicates == 0 and out.late == 0


async def test_cancelled_round_leaves_nothing_pending() -> None:
    engine = IcmpEngine()
    try:
        task = asyncio.create_task(engine.ping("127.0.0.1", count=100, interval=0.01, timeout=1.0))
        await asyncio.sleep(0.2)
        assert engine._pending
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert engine._pending == {}
    finally:
        engine.close()


def test_checksum_is_valid_ones_complement() -> None:
    payload = packets.make_payload(b"abcdefgh", 56)
    pkt = packets.echo_request(False, 0x1234, 77, payload, packets.ones_sum(payload))
    total = packets.ones_sum(pkt)
    assert total == 0xFFFF
    assert len(pkt) == 64


def test_parse_reply_rejects_other_types_and_short_packets() -> None:
    payload = packets.make_payload(b"abcdefgh", 56)
    req = packets.echo_request(False, 1, 2, payload, packets.ones_sum(payload))
    assert parse_reply(req, 0, packets.ECHO_REPLY_V4) is None   # a request, not a reply
    reply = bytes([0]) + req[1:]
    assert parse_reply(reply, 0, packets.ECHO_REPLY_V4) == (1, 2, b"abcdefgh")
    assert parse_reply(reply[:10], 0, packets.ECHO_REPLY_V4) is None


def test_no_permission_for_icmp_sockets_is_a_clear_error_exit_2() -> None:
    """Without CAP_NET_RAW and with ping sockets off, the CLI and the agent say what to do, exit 2."""
    path = "/proc/sys/net/ipv4/ping_group_range"
    old = open(path).read().strip()
    open(path, "w").write("1 0")  # no group may open unprivileged ping sockets
    drop = ["setpriv", "--bounding-set=-net_raw", "--inh-caps=-net_raw", sys.executable, "-m", "netprobe.cli"]
    try:
        out = subprocess.run([*drop, "probe", "icmp", "127.0.0.1", "--count", "1"],
                             capture_output=True, text=True, timeout=60)
    finally:
        open(path, "w").write(old)
    assert out.returncode == 2
    assert "CAP_NET_RAW" in out.stderr and "ping_group_range" in out.stderr
    assert "Traceback" not in out.stderr


def _stall_after_sends(engine: IcmpEngine, seconds: float) -> None:
    """Once a round's last request is out, the next loop callback blocks `seconds` (a GC pause, a
    vCPU stall, a long synchronous step): its replies arrive meanwhile and are read late."""
    loop = asyncio.get_running_loop()
    send_next = engine._send_next

    def send_then_stall(rnd: Any, next_ns: int) -> None:
        send_next(rnd, next_ns)
        if len(rnd.sent_ns) == rnd.count:
            loop.call_soon(time.sleep, seconds)

    engine._send_next = send_then_stall  # type: ignore[method-assign]


@pytest.mark.parametrize(("address", "kind"), [("127.0.0.1", "raw"), ("::1", "raw"), ("127.0.0.1", "dgram")])
async def test_replies_read_after_a_stall_past_the_timeout_are_received(address: str, kind: str) -> None:
    """A reply the kernel stamped within the timeout counts, with the kernel's RTT, however late the
    loop reads it: 0.2 s timeout, loop blocked 0.5 s right after the sends."""
    path = "/proc/sys/net/ipv4/ping_group_range"
    old = open(path).read().strip()
    open(path, "w").write("0 2147483647")
    engine = IcmpEngine(kind="dgram" if kind == "dgram" else "raw")
    try:
        _stall_after_sends(engine, 0.5)
        t0 = time.monotonic()
        out = await engine.ping(address, count=5, interval=0.01, timeout=0.2)
        took = time.monotonic() - t0
    finally:
        engine.close()
        open(path, "w").write(old)
    assert took >= 0.5  # the stall did happen, past every request's timeout
    assert out.sent == 5 and out.late == 0 and out.duplicates == 0, out
    assert all(s is not None and s < 20 for s in out.samples), out  # loopback: µs, not the stall
