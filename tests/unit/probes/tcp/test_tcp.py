"""tcp probe against real loopback sockets.

Provoked for real here: ok (a listener), refused (a closed port), timeout (a listener whose accept
queue is full: Linux drops the SYN, so the handshake never completes). `reset` and `unreachable`
cannot be provoked on loopback without sending traffic elsewhere: their errno → class mapping is
unit-tested, and `unreachable` is also provoked for real in an empty network namespace (lab test).
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from netprobe.net.resolve import Resolver
from netprobe.net.socket_cap import SocketCap
from netprobe.probes.base import ProbeContext, ProbeTarget
from netprobe.probes.tcp import runtime as tcp
from netprobe.probes.tcp.runtime import TcpSettings, classify_errno, run


@pytest.fixture
def full_backlog() -> Iterator[tuple[str, int]]:
    """A listener that never accepts, with its (tiny) accept queue already full."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(0)
    addr = srv.getsockname()
    fillers = []
    for _ in range(2):  # Linux queues backlog+1; extra SYNs are then dropped
        c = socket.socket()
        c.setblocking(False)
        c.connect_ex(addr)
        fillers.append(c)
    time.sleep(0.05)
    yield addr
    for c in fillers:
        c.close()
    srv.close()


def ctx() -> ProbeContext:
    return ProbeContext(resolver=Resolver())


def settings(**kw: object) -> TcpSettings:
    base: dict[str, object] = {"count": 3, "interval": 0.05, "timeout": 1.0}
    base.update(kw)
    return TcpSettings.model_validate(base)


async def test_connects_to_a_listener(listener: int) -> None:
    r = await run(ProbeTarget(id="t", host="127.0.0.1", port=listener), settings(count=4), ctx())
    assert r.status == "ok" and r.error_kind is None
    assert (r.sent, r.received, r.loss_pct, r.failures) == (4, 4, 0.0, {})
    assert r.connect_ms is not None and 0 < r.connect_ms.p50 < 50
    assert all(s is not None and s > 0 for s in r.samples_ms)
    assert r.jitter_ms is not None and r.dns_ms is None  # literal: no DNS
    d = r.to_dict()
    assert d["probe"] == "tcp" and d["port"] == listener and d["address"] == "127.0.0.1"


async def test_name_reports_dns_time_separately(listener: int) -> None:
    c = ctx()
    first = await run(ProbeTarget(id="t", host="localhost", port=listener, family=socket.AF_INET),
                      settings(count=1), c)
    assert first.status == "ok" and first.address == "127.0.0.1"
    assert first.dns_ms is not None and first.dns_ms >= 0
    again = await run(ProbeTarget(id="t", host="localhost", port=listener, family=socket.AF_INET),
                      settings(count=1), c)
    assert again.status == "ok" and again.dns_ms is None  # answered from the resolver cache


async def test_ipv6_loopback() -> None:
    srv = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    srv.bind(("::1", 0))
    srv.listen(16)
    try:
        r = await run(ProbeTarget(id="t", host="::1", port=srv.getsockname()[1]), settings(count=2), ctx())
    finally:
        srv.close()
    assert r.status == "ok" and r.address == "::1" and r.received == 2


async def test_closed_port_is_refused(closed_port: int) -> None:
    r = await run(ProbeTarget(id="t", host="127.0.0.1", port=closed_port), settings(), ctx())
    assert r.status == "down" and r.error_kind == "refused"
    assert (r.sent, r.received, r.loss_pct) == (3, 0, 100.0)
    assert r.failures == {"refused": 3} and r.samples_ms == [None, None, None]
    assert r.connect_ms is None and r.jitter_ms is None
    assert r.error is not None and "refused" in r.error.lower()


async def test_full_backlog_times_out(full_backlog: tuple[str, int]) -> None:
    host, port = full_backlog
    t0 = time.monotonic()
    r = await run(ProbeTarget(id="t", host=host, port=port), settings(count=3, interval=0.1, timeout=0.4),
                  ctx())
    elapsed = time.monotonic() - t0
    assert r.status == "down" and r.error_kind == "timeout" and r.failures == {"timeout": 3}
    # connects start on schedule and overlap, so the round lasts (count-1)*interval + timeout
    assert 0.55 < elapsed < 0.9, elapsed


async def test_port_from_settings_overrides_target(listener: int, closed_port: int) -> None:
    r = await run(ProbeTarget(id="t", host="127.0.0.1", port=closed_port),
                  settings(count=1, port=listener), ctx())
    assert r.status == "ok" and r.port == listener


async def test_missing_port_is_an_error_not_an_exception() -> None:
    r = await run(ProbeTarget(id="t", host="127.0.0.1"), settings(), ctx())
    assert r.status == "error" and r.error_kind == "config" and r.sent == 0
    assert r.error is not None and "port" in r.error


async def test_family_mismatch_is_an_error() -> None:
    r = await run(ProbeTarget(id="t", host="127.0.0.1", port=80, family=socket.AF_INET6), settings(), ctx())
    assert r.status == "error" and r.error_kind == "family" and r.sent == 0


async def test_unresolvable_name_is_a_dns_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*_a: object, **_k: object) -> object:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", fail)
    r = await run(ProbeTarget(id="t", host="nonexistent.invalid", port=443), settings(), ctx())
    assert r.status == "error" and r.error_kind == "dns" and r.sent == 0 and r.dns_ms is not None


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


async def test_cancellation_is_prompt_and_closes_sockets(full_backlog: tuple[str, int]) -> None:
    host, port = full_backlog
    before = _open_fds()
    task = asyncio.create_task(run(ProbeTarget(id="t", host=host, port=port),
                                   settings(count=5, interval=0.05, timeout=5.0), ctx()))
    await asyncio.sleep(0.3)
    t0 = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - t0 < 0.5
    assert _open_fds() == before


async def test_a_connect_without_answer_times_out(full_backlog: tuple[str, int]) -> None:
    host, port = full_backlog
    r = await run(ProbeTarget(id="t", host=host, port=port), settings(count=1, timeout=0.2), ctx())
    assert r.samples_ms == [None] and r.failures == {"timeout": 1}


async def test_a_socket_cap_queues_connects_and_cancel_frees_its_slots(
        full_backlog: tuple[str, int]) -> None:
    """Two slots for three rounds of two connects to a silent port: only two sockets are ever open;
    a round cancelled while it holds or waits for slots hands them on, and every round ends."""
    host, port = full_backlog
    cap = SocketCap(2)
    c = ProbeContext(resolver=Resolver(), tcp_slots=cap)
    target = ProbeTarget(id="t", host=host, port=port)
    before = _open_fds()
    tasks = [asyncio.create_task(run(target, settings(count=2, interval=0.01, timeout=0.3), c))
             for _ in range(3)]
    await asyncio.sleep(0.1)
    assert _open_fds() - before == 2 and cap.free == 0
    tasks[0].cancel()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert isinstance(results[0], asyncio.CancelledError)
    assert all(r.failures == {"timeout": 2} for r in results[1:])  # type: ignore[union-attr]
    assert cap.free == 2 and _open_fds() == before


@pytest.mark.parametrize(("err", "kind"), [
    (errno.ECONNREFUSED, "refused"),
    (errno.ETIMEDOUT, "timeout"),
    (errno.ECONNRESET, "reset"),
    (errno.ECONNABORTED, "reset"),
    (errno.EHOSTUNREACH, "unreachable"),
    (errno.ENETUNREACH, "unreachable"),
    (errno.EADDRNOTAVAIL, "unreachable"),
    (errno.EACCES, "unreachable"),   # ICMPv6 administratively prohibited
    (errno.EPERM, "unreachable"),    # a local firewall rule
    (errno.EINVAL, "unreachable"),   # anything unexpected
])
def test_errno_classification(err: int, kind: str) -> None:
    assert classify_errno(err) == kind


@pytest.mark.lab
def test_unreachable_for_real_in_an_empty_namespace() -> None:
    """No route at all (fresh namespace, loopback down): connect fails with ENETUNREACH locally."""
    code = ("import asyncio\n"
            "from netprobe.probes.base import ProbeContext, ProbeTarget\n"
            "from netprobe.probes.tcp.runtime import TcpSettings, run\n"
            "from netprobe.net.resolve import Resolver\n"
            "r = asyncio.run(run(ProbeTarget(id='t', host='198.18.0.1', port=443),\n"
            "    TcpSettings(count=2, interval=0.05, timeout=1), ProbeContext(resolver=Resolver())))\n"
            "print(r.status, r.error_kind, r.failures)\n")
    out = subprocess.run(["unshare", "--net", sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "down unreachable {'unreachable': 2}"


def stall_after_each_start(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """The loop blocks `seconds` in the callback after each connect starts, before it can see the
    handshake complete (a GC pause, a vCPU stall, a long synchronous step)."""
    start = tcp._Connects._start

    def start_then_stall(self: tcp._Connects, i: int) -> None:
        start(self, i)
        asyncio.get_running_loop().call_soon(time.sleep, seconds)

    monkeypatch.setattr(tcp._Connects, "_start", start_then_stall)


async def test_a_handshake_seen_late_keeps_the_kernels_time(listener: int,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """0.2 s timeout, the loop blocked 0.5 s after each connect starts: every handshake, done by the
    kernel in µs, counts with the kernel's time (TCP_INFO), not the stall."""
    stall_after_each_start(monkeypatch, 0.5)
    t0 = time.monotonic()
    r = await run(ProbeTarget(id="t", host="127.0.0.1", port=listener),
                  settings(count=2, interval=0.01, timeout=0.2), ctx())
    assert time.monotonic() - t0 >= 1.0  # both stalls happened
    assert r.status == "ok" and r.received == 2 and r.failures == {}, r
    assert all(s is not None and s < 20 for s in r.samples_ms), r.samples_ms


async def test_a_retransmitted_syn_is_timed_by_the_loop_wait_included() -> None:
    """The first SYN is dropped (accept queue full) and the kernel's retry after ~1 s is answered: the
    connect took ~1 s, the kernel's figure (one round trip) would leave that out, so the loop's is kept."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(0)
    fillers = [socket.socket() for _ in range(2)]
    for c in fillers:
        c.setblocking(False)
        c.connect_ex(srv.getsockname())
    await asyncio.sleep(0.05)
    try:
        probe = asyncio.create_task(run(ProbeTarget(id="t", host="127.0.0.1", port=srv.getsockname()[1]),
                                        settings(count=1, timeout=3.0), ctx()))
        await asyncio.sleep(0.3)
        for _ in fillers:  # room for the retried SYN
            srv.accept()[0].close()
        r = await probe
    finally:
        for c in fillers:
            c.close()
        srv.close()
    assert r.status == "ok", r
    assert r.samples_ms[0] is not None and r.samples_ms[0] > 900, r.samples_ms
