"""tcp probe: `count` connects to host:port; SYN → established timed, DNS timed separately.

Each connect is a non-blocking connect() timed with perf_counter_ns from just before the call to
the moment the event loop sees the socket writable with SO_ERROR 0 (handshake complete); when no SYN
was retransmitted, the kernel's own time of the handshake (TCP_INFO) replaces it, which a stalled
loop cannot stretch. The socket is then closed normally (FIN): SO_LINGER 0 would free our side
faster but answers the server with a RST, which services log as errors and IDSes flag — a monitor
should be polite, and the TIME_WAIT it leaves on our side is cheap.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import os
import socket
import struct
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field

from netprobe.config.durations import Duration
from netprobe.net.socket_cap import SocketCap
from netprobe.probes.base import (
    ProbeContext,
    ProbeRuntime,
    ProbeTarget,
    TargetOption,
)
from netprobe.probes.results import ProbeResult
from netprobe.probes.settings import RoundSettings
from netprobe.stats import RttStats, jitter, loss_pct, rtt_stats
from netprobe.times import utc_now


class TcpSettings(RoundSettings):
    count: int = Field(default=5, ge=1, le=1000, description="connects per round")
    interval: Duration = Field(default=1.0, gt=0, description="time between connects of a round")
    timeout: Duration = Field(default=3.0, gt=0, description="per connect timeout")
    port: int | None = Field(default=None, ge=1, le=65535, description="overrides the target's tcp_port")


TcpFailure = Literal["refused", "timeout", "unreachable", "reset", "dns"]


@dataclass(slots=True)
class TcpResult(ProbeResult):
    port: int = 0
    sent: int = 0
    received: int = 0          # successful connects
    loss_pct: float = 0.0      # failed connects, as a percentage
    dns_ms: float | None = None
    connect_ms: RttStats | None = None
    jitter_ms: float | None = None
    samples_ms: list[float | None] = field(default_factory=list)
    failures: dict[str, int] = field(default_factory=dict)   # TcpFailure -> count

    def to_dict(self) -> dict[str, Any]:
        return self.fields_dict()


# How a failed connect's errno reads as one of docs/numbers.md classes. ICMP errors arrive as errnos
# too (Linux aborts a connect in SYN_SENT on them): port unreachable → ECONNREFUSED, net/host
# unreachable and admin-prohibited → ENETUNREACH/EHOSTUNREACH/EACCES, TTL exceeded → EHOSTUNREACH.
# A RST answering our SYN is ECONNREFUSED ("refused"); "reset" is a connection torn down during the
# handshake (ECONNRESET/ECONNABORTED), rare but real behind middleboxes.
_ERRNO_KIND: dict[int, TcpFailure] = {
    errno.ECONNREFUSED: "refused",
    errno.ETIMEDOUT: "timeout",
    errno.ECONNRESET: "reset",
    errno.ECONNABORTED: "reset",
    errno.EPIPE: "reset",
    errno.EHOSTUNREACH: "unreachable",
    errno.ENETUNREACH: "unreachable",
    errno.ENETDOWN: "unreachable",
    errno.EHOSTDOWN: "unreachable",
    errno.EADDRNOTAVAIL: "unreachable",
    errno.EAFNOSUPPORT: "unreachable",
    errno.EACCES: "unreachable",
    errno.EPERM: "unreachable",
    errno.ENOPROTOOPT: "unreachable",
    errno.EMSGSIZE: "unreachable",
}


def classify_errno(err: int) -> TcpFailure:
    """Failure class of a connect errno; anything unexpected counts as `unreachable`."""
    return _ERRNO_KIND.get(err, "unreachable")


@dataclass(frozen=True, slots=True)
class Attempt:
    connect_ms: float | None
    kind: TcpFailure | None = None
    error: str | None = None


SockAddr = tuple[str, int] | tuple[str, int, int, int]


def _where(family: int, sockaddr: SockAddr) -> str:
    return f"[{sockaddr[0]}]:{sockaddr[1]}" if family == socket.AF_INET6 else f"{sockaddr[0]}:{sockaddr[1]}"


def _failure(err: int, family: int, sockaddr: SockAddr) -> Attempt:
    return Attempt(None, classify_errno(err), f"{_where(family, sockaddr)}: {os.strerror(err)}")


_TCP_INFO_LEN = 104  # struct tcp_info up to tcpi_total_retrans
_U32 = struct.Struct("=I")
_TCPI_RTT, _TCPI_TOTAL_RETRANS = 68, 100  # offsets of the two u32 fields read (tcpi_rtt in µs)


def kernel_connect_ms(sock: socket.socket) -> float | None:
    """SYN sent → SYN-ACK received as the kernel timed it (its first RTT sample), or None when a SYN
    was retransmitted (that sample leaves out the wait before the retransmission) or it is unknown."""
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_LEN)
    except OSError:
        return None
    if len(info) < _TCP_INFO_LEN:
        return None
    rtt_us = _U32.unpack_from(info, _TCPI_RTT)[0]
    retrans = _U32.unpack_from(info, _TCPI_TOTAL_RETRANS)[0]
    return rtt_us / 1000 if rtt_us and not retrans else None


class _Connects:
    """A round's connects driven by event-loop callbacks, no task per connect: each starts on a timer,
    finishes in its writer callback (stamped there) or its timeout, and the round's future is set
    when the last one has. Per connect that is two loop wake-ups and a few Python steps instead of a
    task's five or six (sleep, start, connect, wake, finish). The socket is created non-blocking (no
    ioctl). With a SocketCap, a connect whose turn comes while every slot is taken starts when one
    frees."""

    __slots__ = ("_cap", "_family", "_left", "_live", "_loop", "_queued", "_sockaddr", "_starts",
                 "_timeout", "done", "out")

    def __init__(self, loop: asyncio.AbstractEventLoop, family: int, sockaddr: SockAddr,
                 settings: TcpSettings, cap: SocketCap | None = None) -> None:
        self._loop, self._family, self._sockaddr, self._timeout = loop, family, sockaddr, settings.timeout
        self._cap = cap
        self._queued: dict[int, Callable[[], None]] = {}   # waiting for a slot of the cap
        self.out: list[Attempt] = [Attempt(None)] * settings.count
        self._left = settings.count
        self._live: dict[int, tuple[socket.socket, asyncio.TimerHandle]] = {}
        self.done: asyncio.Future[None] = loop.create_future()
        start = loop.time()
        self._starts = [loop.call_at(start + i * settings.interval, self._due, i)
                        for i in range(settings.count)]

    def _record(self, i: int, attempt: Attempt) -> None:
        self.out[i] = attempt
        self._left -= 1
        if self._cap is not None:
            self._cap.release()
        if self._left == 0 and not self.done.done():
            self.done.set_result(None)

    def _due(self, i: int) -> None:
        if self._cap is None:
            self._start(i)
            return
        start = functools.partial(self._slot_given, i)
        if self._cap.take(start):
            self._start(i)
        else:
            self._queued[i] = start

    def _slot_given(self, i: int) -> None:
        self._queued.pop(i, None)
        if self.done.done():  # the round was cancelled meanwhile: hand the slot on
            assert self._cap is not None
            self._cap.release()
            return
        self._start(i)

    def _start(self, i: int) -> None:
        try:
            sock = socket.socket(self._family, socket.SOCK_STREAM | socket.SOCK_NONBLOCK)
        except OSError as exc:
            self._record(i, _failure(exc.errno or errno.EAFNOSUPPORT, self._family, self._sockaddr))
            return
        try:
            t0 = time.perf_counter_ns()
            err = sock.connect_ex(self._sockaddr)
            if err == errno.EINPROGRESS:
                fd = sock.fileno()
                self._loop.add_writer(fd, self._writable, i, sock, t0)
                self._live[i] = (sock, self._loop.call_later(self._timeout, self._expired, i))
                return
            t1 = time.perf_counter_ns()
        except BaseException as exc:  # a bug or the like: the round fails, it does not hang
            sock.close()
            if self._cap is not None:
                self._cap.release()
            if not self.done.done():
                self.done.set_exception(exc)
            return
        sock.close()
        # 0: completed synchronously (possible on loopback)
        self._record(i, Attempt((t1 - t0) / 1e6) if err == 0 else _failure(err, self._family, self._sockaddr))

    def _writable(self, i: int, sock: socket.socket, t0: int) -> None:
        t1 = time.perf_counter_ns()  # stamped here, first
        self._live.pop(i)[1].cancel()
        self._loop.remove_writer(sock.fileno())
        err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            sock.close()
            self._record(i, _failure(err, self._family, self._sockaddr))
            return
        # A loop that stalled sees the handshake late: the kernel's figure is the one it took. One past
        # the timeout completed after its deadline, lost as it is when the timer sees it first.
        kernel = kernel_connect_ms(sock)
        sock.close()
        if kernel is not None and kernel > self._timeout * 1000:
            self._record(i, self._timed_out())
        else:
            self._record(i, Attempt(kernel if kernel is not None else (t1 - t0) / 1e6))

    def _timed_out(self) -> Attempt:
        where = _where(self._family, self._sockaddr)
        return Attempt(None, "timeout", f"{where}: no answer within {self._timeout:g}s")

    def _expired(self, i: int) -> None:
        sock, _ = self._live.pop(i)
        self._loop.remove_writer(sock.fileno())
        sock.close()
        self._record(i, self._timed_out())

    def close(self) -> None:
        """Cancelled (the scheduler's bound): nothing more starts, and every open socket is closed."""
        for handle in self._starts:
            handle.cancel()  # also drops its bound method: no cycle through self left for the GC
        self._starts = []
        if self._cap is not None:
            for start in self._queued.values():
                self._cap.forget(start)
        self._queued.clear()
        for sock, timer in self._live.values():
            timer.cancel()
            self._loop.remove_writer(sock.fileno())
            sock.close()
            if self._cap is not None:
                self._cap.release()
        self._live.clear()
        if not self.done.done():  # a slot handed to this round after now is passed on (_slot_given)
            self.done.cancel()


async def _attempts(family: int, sockaddr: SockAddr, settings: TcpSettings,
                    cap: SocketCap | None = None) -> list[Attempt]:
    """`count` connects started `interval` apart on a fixed schedule; they may overlap. With `cap`,
    a connect waits for a free slot (a socket) and is timed from when it starts, never failed."""
    connects = _Connects(asyncio.get_running_loop(), family, sockaddr, settings, cap)
    try:
        await connects.done
    finally:
        connects.close()
    return connects.out


def _sockaddr(address: str, port: int, family: int) -> tuple[str, int] | tuple[str, int, int, int]:
    # numeric only (no DNS): turns "fe80::1%eth0" into a sockaddr with its scope id
    info = socket.getaddrinfo(address, port, family, socket.SOCK_STREAM, 0, socket.AI_NUMERICHOST)
    addr = info[0][4]
    if family == socket.AF_INET6 and len(addr) == 4:
        return (str(addr[0]), int(addr[1]), int(addr[2]), int(addr[3]))
    return (str(addr[0]), int(addr[1]))


async def run(target: ProbeTarget, settings: TcpSettings, ctx: ProbeContext) -> TcpResult:
    t0 = time.monotonic()
    port = settings.port or target.port
    res = TcpResult(probe="tcp", host=target.host, started_at=utc_now(), status="error", port=port or 0)
    if port is None:
        res.error_kind = "config"
        res.error = f"target {target.id!r} has no TCP port (set tcp_port or [probes.tcp] port)"
        return _finish(res, t0)
    resolved = await ctx.resolver.resolve(target.host, target.family)
    res.dns_ms = resolved.dns_ms
    if resolved.address is None:
        res.error_kind, res.error = resolved.error_kind or "dns", resolved.error
        return _finish(res, t0)
    res.address = resolved.address
    try:
        sockaddr = _sockaddr(resolved.address, port, resolved.family)
    except (OSError, UnicodeError) as exc:
        res.error_kind, res.error = "dns", f"unusable address {resolved.address!r}: {exc}"
        return _finish(res, t0)

    attempts = await _attempts(resolved.family, sockaddr, settings, ctx.tcp_slots)
    samples = [a.connect_ms for a in attempts]
    got = [s for s in samples if s is not None]
    failures: Counter[str] = Counter(a.kind for a in attempts if a.kind is not None)
    res.status = "ok" if got else "down"
    if not got:  # down: name the most common failure (ties: the one seen first)
        kind = failures.most_common(1)[0][0]
        res.error_kind = kind
        res.error = next(a.error for a in attempts if a.kind == kind)
    res.sent, res.received = len(attempts), len(got)
    res.loss_pct = loss_pct(len(attempts), len(got))
    res.connect_ms, res.jitter_ms = rtt_stats(got), jitter(samples)
    res.samples_ms, res.failures = samples, dict(failures)
    return _finish(res, t0)


def _finish(res: TcpResult, t0: float) -> TcpResult:
    res.duration_ms = (time.monotonic() - t0) * 1000
    return res



PORT_OPTION = TargetOption(key="tcp_port", annotation=int, fills="port",
                           field=Field(default=443, ge=1, le=65535, description="port of the tcp probe"))

RUNTIME = ProbeRuntime(settings_model=TcpSettings, run=run, result_type=TcpResult,
                       target_options=(PORT_OPTION,))
