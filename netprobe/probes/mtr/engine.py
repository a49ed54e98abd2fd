"""The mtr engine: TTL-limited probes for any number of concurrent traces.

One raw ICMP socket per address family is shared by every trace: it receives the routers' Time
Exceeded and Unreachable messages for all three modes and the echo replies of ICMP mode. A UDP trace
sends from a socket of its own, a TCP trace from a raw TCP socket of its own (bound to a port it
reserves, so its SYN-ACKs are told apart). Each probe is found again by a key carried in the first
8 bytes of its transport header (see packets), so traces to many targets never mix. A cycle's probes
are spread over the interval as mtr spreads them (TTL t of n hops at t·interval/n), not sent as one
burst of up to max_hops packets per trace.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import itertools
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from netprobe.errors import SetupError
from netprobe.net import rxstamp
from netprobe.probes.mtr import packets
from netprobe.probes.mtr.packets import Mode, Reply

IPV6_CHECKSUM = 7
ProbeKey = tuple[str, int, int]


@dataclass(slots=True)
class ProbeRecord:
    """One probe: sent in `cycle` with `ttl`; answered by `responder` after `rtt_ms`, or lost."""

    cycle: int
    ttl: int
    sent_ns: int
    rtt_ms: float | None = None
    responder: str | None = None
    kind: str | None = None  # ttl (a router), reached (the destination), unreach (refused on the way)


@dataclass(slots=True)
class TraceOutcome:
    probes: list[ProbeRecord]
    error_kind: str | None = None
    error: str | None = None


@dataclass(slots=True, eq=False)
class _Trace:
    family: int
    dest: bytes
    mode: Mode
    port: int
    max_hops: int
    records: dict[ProbeKey, ProbeRecord] = field(default_factory=dict)
    order: list[ProbeRecord] = field(default_factory=list)
    dest_ttl: int | None = None
    stop_ttl: int | None = None      # an Unreachable from a router ends the path there
    sock: socket.socket | None = None  # UDP socket or raw TCP socket of this trace
    reserve: socket.socket | None = None  # TCP: holds the source port
    src: bytes = b""
    sport: int = 0
    next_id: int = 1
    settled: asyncio.Event = field(default_factory=asyncio.Event)
    sockaddr: tuple[str, int] = ("", 0)   # where every probe is sent (raw sockets: port 0)
    sent_all: bool = False   # the last cycle is out: only then can a reply settle the trace
    deadline_ns: int = 0     # CLOCK_REALTIME end of the wait for late replies: later stamps are lost

    def limit(self) -> int:
        """Highest TTL still worth probing: the destination's, or where the path was refused."""
        return min(x for x in (self.dest_ttl, self.stop_ttl, self.max_hops) if x is not None)

    def unsettled(self) -> bool:
        limit = self.limit()
        return any(r.kind is None and r.ttl <= limit for r in self.order)


class TraceEngine:
    def __init__(self) -> None:
        self._icmp: dict[int, socket.socket] = {}
        self._pending: dict[ProbeKey, tuple[_Trace, ProbeRecord]] = {}
        self._ident = int.from_bytes(os.urandom(2), "big")
        self._seq = itertools.count(int.from_bytes(os.urandom(2), "big"))
        self._loop: asyncio.AbstractEventLoop | None = None

    async def trace(self, address: str, *, mode: Mode = "icmp", port: int = 0, cycles: int = 10,
                    interval: float = 1.0, timeout: float = 2.0, max_hops: int = 30,
                    on_cycle: Callable[[list[ProbeRecord]], None] | None = None) -> TraceOutcome:
        """Run `cycles` rounds of probes with TTL 1..max_hops (1..the destination's, once known), each
        cycle's spread evenly over `interval`."""
        loop = self._loop = asyncio.get_running_loop()
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        run = _Trace(family, socket.inet_pton(family, address), mode, port, max_hops)
        run.sockaddr = (address, 0)
        try:
            self._open_icmp(family)
            try:
                if mode != "icmp":
                    self._open_flow(run, address)
                t0 = loop.time()
                for cycle in range(cycles):
                    start = t0 + cycle * interval
                    await asyncio.sleep(max(0.0, start - loop.time()))
                    if on_cycle is not None and cycle:
                        on_cycle(list(run.order))
                    await self._cycle(loop, run, cycle, start, interval / run.limit())
                run.settled.clear()
                run.sent_all = True
                run.deadline_ns = time.time_ns() + int(timeout * 1e9)
                if run.unsettled():
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(run.settled.wait(), timeout)
                    # what is queued was stamped on arrival: a reply in time but not yet read (the loop
                    # stalled) still counts, one after the deadline does not (_match)
                    self._read_queued(run)
                if on_cycle is not None:
                    on_cycle(list(run.order))
                return TraceOutcome(run.order)
            finally:
                self._close_run(run)
        except SetupError:
            raise
        except OSError as exc:
            kind = "unreachable" if exc.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH) else "send"
            return TraceOutcome(run.order, kind, exc.strerror or str(exc))

    def _cycle(self, loop: asyncio.AbstractEventLoop, run: _Trace, cycle: int, start: float,
               step: float) -> asyncio.Future[None]:
        """Send one cycle, TTL t at start + (t-1)·step, from timer callbacks rather than a sleeping
        task (one loop wake-up per probe instead of two, and no task step); the future is set once
        the cycle is out. It stops early once this cycle finds the destination."""
        sender = _CycleSender(self, loop, run, cycle, start, step)
        sender.send_due()
        return sender.done

    def close(self) -> None:
        for sock in self._icmp.values():
            if self._loop is not None:
                self._loop.remove_reader(sock.fileno())
            sock.close()
        self._icmp.clear()

    # -- sockets ------------------------------------------------------------------------------------

    def _open_icmp(self, family: int) -> None:
        if family in self._icmp:
            return
        v6 = family == socket.AF_INET6
        sock = _raw(family, socket.IPPROTO_ICMPV6 if v6 else socket.IPPROTO_ICMP)
        packets.attach_icmp_filter(sock, v6, self._ident)
        assert self._loop is not None
        self._loop.add_reader(sock.fileno(), self._on_icmp, sock, v6)
        self._icmp[family] = sock

    def _open_flow(self, run: _Trace, address: str) -> None:
        v6 = run.family == socket.AF_INET6
        probe = socket.socket(run.family, socket.SOCK_DGRAM)
        try:
            probe.connect((address, run.port or 33434))  # no packet: only asks the kernel for a source
            run.src = socket.inet_pton(run.family, probe.getsockname()[0])
        finally:
            probe.close()
        # a socket of the flow's own protocol holds the source port, so replies to it are ours alone
        reserve = socket.socket(run.family, socket.SOCK_DGRAM if run.mode == "udp" else socket.SOCK_STREAM)
        reserve.bind(("::" if v6 else "0.0.0.0", 0))
        run.reserve, run.sport = reserve, reserve.getsockname()[1]
        sock = _raw(run.family, socket.IPPROTO_UDP if run.mode == "udp" else socket.IPPROTO_TCP)
        run.sock = sock
        if run.mode == "tcp":
            if v6:
                sock.setsockopt(socket.IPPROTO_IPV6, IPV6_CHECKSUM, 16)
            packets.attach_tcp_filter(sock, v6, run.sport)
            assert self._loop is not None
            self._loop.add_reader(sock.fileno(), self._on_tcp, sock, v6)
        else:
            packets.attach_drop_all(sock)  # send-only: a raw UDP socket would copy every datagram

    def _close_run(self, run: _Trace) -> None:
        for key in list(run.records):
            self._pending.pop(key, None)
        if run.sock is not None:
            if run.mode == "tcp" and self._loop is not None:
                self._loop.remove_reader(run.sock.fileno())
            run.sock.close()
        if run.reserve is not None:
            run.reserve.close()

    # -- sending ------------------------------------------------------------------------------------

    def _send(self, run: _Trace, cycle: int, ttl: int) -> None:
        v6 = run.family == socket.AF_INET6
        if run.mode == "icmp":
            seq = self._next_seq()
            key: ProbeKey = ("icmp", self._ident, seq)
            data, sock = packets.icmp_echo(v6, self._ident, seq), self._icmp[run.family]
        elif run.mode == "udp":
            csum = run.next_id
            run.next_id = run.next_id % 0xFFFE + 1
            key = ("udp", run.sport, csum)
            data = packets.udp_probe(run.src, run.dest, run.sport, run.port, csum)
            assert run.sock is not None
            sock = run.sock
        else:
            seq = (run.next_id * 0x10001 + self._ident) & 0xFFFFFFFF
            run.next_id += 1
            key = ("tcp", run.sport, seq)
            data = packets.tcp_syn(run.src, run.dest, run.sport, run.port, seq)
            assert run.sock is not None
            sock = run.sock
        if v6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_UNICAST_HOPS, ttl)
        else:
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_TTL, ttl)
        record = ProbeRecord(cycle, ttl, time.time_ns())  # CLOCK_REALTIME, as SO_TIMESTAMPNS stamps
        self._pending[key] = (run, record)
        run.records[key] = record
        run.order.append(record)
        try:
            sock.sendto(data, run.sockaddr)
        except OSError as exc:
            if exc.errno not in (errno.ENOBUFS, errno.EAGAIN, errno.ECONNREFUSED):
                raise
            # a full queue loses this probe as a congested link would; the trace goes on

    def _next_seq(self) -> int:
        while True:
            seq = next(self._seq) & 0xFFFF
            if ("icmp", self._ident, seq) not in self._pending:
                return seq

    # -- receiving ----------------------------------------------------------------------------------

    def _on_icmp(self, sock: socket.socket, v6: bool) -> None:
        for data, src, rx_ns in _drain(sock, v6):
            reply = packets.parse_icmp(data, src, v6, self._ident)
            if reply is not None:
                self._match(reply, rx_ns)

    def _on_tcp(self, sock: socket.socket, v6: bool) -> None:
        for data, src, rx_ns in _drain(sock, v6):
            reply = packets.parse_tcp(data, src, v6)
            if reply is not None:
                self._match(reply, rx_ns)

    def _read_queued(self, run: _Trace) -> None:
        v6 = run.family == socket.AF_INET6
        self._on_icmp(self._icmp[run.family], v6)
        if run.mode == "tcp" and run.sock is not None:
            self._on_tcp(run.sock, v6)

    def _match(self, reply: Reply, rx_ns: int) -> None:
        hit = self._pending.get(reply.key)
        if hit is None:
            return
        run, record = hit
        if reply.dest != run.dest or record.kind is not None:
            return  # someone else's packet with a colliding key, or a duplicate
        if run.deadline_ns and rx_ns > run.deadline_ns:
            return  # came after the wait for late replies: lost, however soon a stalled loop reads it
        record.rtt_ms = max(0.0, (rx_ns - record.sent_ns) / 1e6)
        record.responder = socket.inet_ntop(run.family, reply.responder)
        record.kind = reply.kind
        if reply.kind == "reached" and (run.dest_ttl is None or record.ttl < run.dest_ttl):
            run.dest_ttl = record.ttl
        elif reply.kind == "unreach" and (run.stop_ttl is None or record.ttl < run.stop_ttl):
            run.stop_ttl = record.ttl
        if run.sent_all and not run.unsettled():  # (scanning every probe per reply while sending is waste)
            run.settled.set()


class _CycleSender:
    """TraceEngine._cycle's timer callbacks. A class, not a closure: a closure that schedules itself
    is a reference cycle, and a trace's records would wait for the garbage collector."""

    __slots__ = ("_cycle", "_engine", "_handle", "_loop", "_run", "_start", "_step", "_ttl", "done")

    def __init__(self, engine: TraceEngine, loop: asyncio.AbstractEventLoop, run: _Trace, cycle: int,
                 start: float, step: float) -> None:
        self._engine, self._loop, self._run, self._cycle = engine, loop, run, cycle
        self._start, self._step, self._ttl = start, step, 1
        self._handle: asyncio.TimerHandle | None = None
        self.done: asyncio.Future[None] = loop.create_future()
        self.done.add_done_callback(self._on_done)

    def send_due(self) -> None:
        self._handle = None
        if self.done.done():  # cancelled
            return
        run = self._run
        try:
            while self._ttl <= run.limit():
                due = self._start + (self._ttl - 1) * self._step
                if due > self._loop.time():
                    self._handle = self._loop.call_at(due, self.send_due)
                    return
                self._engine._send(run, self._cycle, self._ttl)
                self._ttl += 1
        except Exception as exc:  # a send error ends the trace as it did (TraceOutcome)
            self.done.set_exception(exc)
            return
        self.done.set_result(None)

    def _on_done(self, fut: asyncio.Future[None]) -> None:
        if fut.cancelled() and self._handle is not None:
            self._handle.cancel()
            self._handle = None


def _raw(family: int, proto: int) -> socket.socket:
    try:
        sock = socket.socket(family, socket.SOCK_RAW, proto)
    except PermissionError:
        raise SetupError("mtr needs raw sockets: run as root or grant CAP_NET_RAW "
                         "(systemd: AmbientCapabilities=CAP_NET_RAW)") from None
    except OSError as exc:
        if exc.errno in (errno.EAFNOSUPPORT, errno.EPROTONOSUPPORT):
            v = "IPv6" if family == socket.AF_INET6 else "IPv4"
            raise SetupError(f"this host has no {v} support: {exc}") from exc
        raise
    sock.setblocking(False)
    rxstamp.enable(sock)
    return sock


def _drain(sock: socket.socket, v6: bool) -> list[tuple[bytes, bytes, int]]:
    """Everything queued on `sock`: (packet, source address bytes, kernel receive time ns)."""
    out: list[tuple[bytes, bytes, int]] = []
    family = socket.AF_INET6 if v6 else socket.AF_INET
    while True:
        try:
            data, anc, _flags, addr = sock.recvmsg(65535, rxstamp.ANC_SPACE)
        except (BlockingIOError, InterruptedError):
            return out
        except OSError:
            continue  # a queued ICMP error on the socket itself; never fatal
        rx_ns = rxstamp.rx_ns(anc)
        src = socket.inet_pton(family, addr[0].split("%", 1)[0])
        out.append((data, src, rx_ns or time.time_ns()))
