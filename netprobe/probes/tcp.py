"""tcp probe: `count` connects to host:port; SYN → established timed, DNS timed separately.

Each connect is a non-blocking connect() timed with perf_counter_ns from just before the call to
the moment the event loop sees the socket writable with SO_ERROR 0 (handshake complete). The
socket is then closed normally (FIN): SO_LINGER 0 would free our side faster but answers the
server with a RST, which services log as errors and IDSes flag — a monitor should be polite, and
the TIME_WAIT it leaves on our side is cheap.
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field

from netprobe.config.durations import Duration
from netprobe.probes.base import (
    AlertMetric,
    ProbeContext,
    ProbeSpec,
    ProbeTarget,
    ReportColumn,
    ReportRole,
    RoundSettings,
    TargetOption,
)
from netprobe.probes.results import ProbeResult
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
        d = ProbeResult.to_dict(self)
        d.update(port=self.port, sent=self.sent, received=self.received, loss_pct=self.loss_pct,
                 dns_ms=self.dns_ms, connect_ms=self.connect_ms.to_dict() if self.connect_ms else None,
                 jitter_ms=self.jitter_ms, samples_ms=list(self.samples_ms), failures=dict(self.failures))
        return d


# How a failed connect's errno reads as one of DESIGN §3's classes. ICMP errors arrive as errnos
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


def _failure(err: int, where: str) -> Attempt:
    return Attempt(None, classify_errno(err), f"{where}: {os.strerror(err)}")


async def connect_once(family: int, sockaddr: tuple[str, int] | tuple[str, int, int, int],
                       timeout: float) -> Attempt:
    """One timed connect; every failure is returned as data. Cancellation closes the socket."""
    loop = asyncio.get_running_loop()
    where = f"[{sockaddr[0]}]:{sockaddr[1]}" if family == socket.AF_INET6 else f"{sockaddr[0]}:{sockaddr[1]}"
    try:
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError as exc:
        return _failure(exc.errno or errno.EAFNOSUPPORT, where)
    watching = False
    try:
        sock.setblocking(False)
        writable: asyncio.Future[int] = loop.create_future()

        def on_writable() -> None:
            if not writable.done():
                writable.set_result(time.perf_counter_ns())  # stamped here, not after the await

        t0 = time.perf_counter_ns()
        err = sock.connect_ex(sockaddr)
        if err == 0:  # completed synchronously (possible on loopback)
            return Attempt((time.perf_counter_ns() - t0) / 1e6)
        if err != errno.EINPROGRESS:
            return _failure(err, where)
        loop.add_writer(sock.fileno(), on_writable)
        watching = True
        try:
            async with asyncio.timeout(timeout):
                t1 = await writable
        except TimeoutError:
            return Attempt(None, "timeout", f"{where}: no answer within {timeout:g}s")
        err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            return _failure(err, where)
        return Attempt((t1 - t0) / 1e6)
    finally:
        if watching:
            loop.remove_writer(sock.fileno())
        sock.close()


async def _attempts(family: int, sockaddr: tuple[str, int] | tuple[str, int, int, int],
                    settings: TcpSettings, slots: asyncio.Semaphore | None = None) -> list[Attempt]:
    """`count` connects started `interval` apart on a fixed schedule; they may overlap. With `slots`,
    a connect waits for a free one (a socket) and is timed from when it starts, never failed."""
    loop = asyncio.get_running_loop()
    out: list[Attempt] = [Attempt(None)] * settings.count

    async def one(i: int) -> None:
        if slots is None:
            out[i] = await connect_once(family, sockaddr, settings.timeout)
        else:
            async with slots:
                out[i] = await connect_once(family, sockaddr, settings.timeout)

    start = loop.time()
    async with asyncio.TaskGroup() as tg:
        for i in range(settings.count):
            delay = start + i * settings.interval - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            tg.create_task(one(i))
    return out


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

SPEC = ProbeSpec(name="tcp", settings_model=TcpSettings, run=run, result_type=TcpResult,
                 cli="netprobe.probes.tcp_cli",
                 target_options=(PORT_OPTION,),
                 alert_metrics=(AlertMetric("rtt_p95_ms", rank=2), AlertMetric("jitter_ms", rank=2)),
                 report=ReportRole(figures=(("tcp_connect_p95_ms", "rtt_p95_ms"),),
                                   columns=(ReportColumn("tcp p95", "tcp_connect_p95_ms"),),
                                   on_row=("tcp_connect_p95_ms",)))
