"""The impairment relay: one process owning every route's TUN pair.

Packets read from the isp-side TUN go to the datacenter-side TUN after the forward delay, and
back after the reverse delay. A plain synchronous select() loop is used on purpose: select takes
a microsecond timeout (epoll/asyncio round to milliseconds) and the tests hold RTT to ±1.5 ms.

Run as `python -m netprobe.lab.relay STATE_DIR --ready-fd N` (lab up does this).
"""

from __future__ import annotations

import argparse
import gc
import heapq
import ipaddress
import os
import random
import select
import signal
import socket
import sys
import time
from pathlib import Path
from types import FrameType

from netprobe.lab import addressing as addr
from netprobe.lab import icmp_errors
from netprobe.lab.relay_config import RELAY_APPLIED, RelayConfig, read_config
from netprobe.lab.spec import Impairment
from netprobe.lab.state import RouteInfo
from netprobe.lab.tun import open_listeners, open_tun
from netprobe.times import set_timer_slack

READ_BATCH = 256
MAX_PACKET = 65_536
MAX_LEAD_NS = 1_000_000
RT_PRIORITY = 10


class Direction:
    """One direction of one route: where packets go, how they are impaired, the routers they pass.

    `n_hops` routers each take one off the TTL; those in `hops4`/`hops6` answer Time Exceeded, and
    with those lists empty (no return_hops in the spec) they are silent.
    """

    __slots__ = ("delay_ns", "duplicate", "hop_loss", "hops4", "hops6", "jitter_ns", "last_due", "loss",
                 "n_hops", "out_fd")

    def __init__(self, out_fd: int) -> None:
        self.out_fd = out_fd
        self.delay_ns = 0
        self.jitter_ns = 0.0
        self.loss = 0.0
        self.duplicate = 0.0
        self.last_due = 0
        self.hops4: list[bytes] = []
        self.hops6: list[bytes] = []
        self.hop_loss: list[float] = []
        self.n_hops = 0

    def configure(self, imp: Impairment) -> None:
        self.delay_ns = int(imp.delay_ms * 1_000_000)
        self.jitter_ns = imp.jitter_ms * 1_000_000
        self.loss = imp.loss_pct / 100.0
        self.duplicate = imp.duplicate_pct / 100.0

    def set_hops(self, hops4: list[str], hops6: list[str], loss_pct: list[float], silent: int = 0) -> None:
        self.hops4 = [ipaddress.IPv4Address(h).packed for h in hops4]
        self.hops6 = [ipaddress.IPv6Address(h).packed for h in hops6]
        self.hop_loss = [p / 100.0 for p in loss_pct]
        self.n_hops = len(self.hops4) or silent


class Route:
    __slots__ = ("forward", "reverse")

    def __init__(self, isp_fd: int, dc_fd: int) -> None:
        self.forward = Direction(dc_fd)
        self.reverse = Direction(isp_fd)

    def configure(self, spec: RouteInfo) -> None:
        self.forward.configure(spec.forward)
        self.reverse.configure(spec.reverse)
        self.forward.set_hops(spec.hops, spec.hops6, spec.hop_loss_pct)
        if spec.return_hops is None:
            self.reverse.set_hops([], [], [], silent=len(spec.hops))
        else:
            self.reverse.set_hops(spec.return_hops, spec.return_hops6 or [], spec.return_hop_loss_pct)


class Relay:
    def __init__(self, state_dir: Path, config: RelayConfig) -> None:
        self.state_dir = state_dir
        self.config = config
        self.rng = random.Random(config.seed)
        self.heap: list[tuple[int, int, int, bytes]] = []
        self.seq = 0
        self.routes: dict[str, Route] = {}
        self.readers: dict[int, tuple[Route, bool]] = {}  # fd → (route, is forward)
        self.listeners: dict[int, socket.socket] = {}
        self.stats = {"forwarded": 0, "lost": 0, "duplicated": 0, "time_exceeded": 0, "dropped": 0,
                      "accepted": 0}
        self.reload_wanted = False
        self.stop_wanted = False
        self.lead_ns = 0

    # --- setup -----------------------------------------------------------------------------

    def open(self) -> None:
        for spec in self.config.routes:
            tun_isp, tun_dc = addr.tun_names(spec.index)
            isp_fd = open_tun(addr.ISP_NS, tun_isp)
            dc_fd = open_tun(spec.namespace, tun_dc)
            route = Route(isp_fd, dc_fd)
            route.configure(spec)
            self.routes[spec.id] = route
            self.readers[isp_fd] = (route, True)
            self.readers[dc_fd] = (route, False)
            for port in spec.tcp_ports:
                for sock in open_listeners(spec.namespace, tun_dc, port):
                    self.listeners[sock.fileno()] = sock

    def reload(self) -> None:
        try:
            config = read_config(self.state_dir)
        except (OSError, ValueError) as exc:
            log(f"reload failed, keeping the old impairments: {exc}")
            return
        if config.topology() != self.config.topology():
            log("reload refused: topology changed (needs lab down/up)")
            return
        for spec in config.routes:
            self.routes[spec.id].configure(spec)
        if config.seed is not None and config.seed != self.config.seed:
            self.rng.seed(config.seed)
        self.config = config
        self.mark_applied()
        log(f"applied generation {config.generation}; {self.stats}")

    def mark_applied(self) -> None:
        tmp = self.state_dir / (RELAY_APPLIED + ".tmp")
        tmp.write_text(str(self.config.generation))
        tmp.replace(self.state_dir / RELAY_APPLIED)

    # --- packet path ----------------------------------------------------------------------

    def schedule(self, due: int, out_fd: int, packet: bytes) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (due, self.seq, out_fd, packet))

    def delay(self, d: Direction, now: int) -> int:
        """Due time of the next packet: jittered, but never before the previous one (no reorder)."""
        due = now + d.delay_ns
        if d.jitter_ns:
            due += int(self.rng.gauss(0.0, d.jitter_ns))
            due = max(due, now)
        if due < d.last_due:
            due = d.last_due
        d.last_due = due
        return due

    def receive(self, packet: bytes, route: Route, forward: bool, now: int) -> None:
        version = packet[0] >> 4
        if version == 6:
            if packet[24] == 0xFF or packet[8] == 0xFE:  # multicast / link-local chatter of the TUN
                self.stats["dropped"] += 1
                return
        elif version != 4:
            self.stats["dropped"] += 1
            return
        d = route.forward if forward else route.reverse
        if d.loss and self.rng.random() < d.loss:
            self.stats["lost"] += 1
            return
        n_hops = d.n_hops
        if n_hops:
            ttl_at = 8 if version == 4 else 7
            ttl = packet[ttl_at]
            if ttl <= n_hops:
                if d.hops4:
                    self.expire(packet, route, forward, max(ttl, 1), version, now)
                else:
                    self.stats["dropped"] += 1
                return
            buf = bytearray(packet)
            buf[ttl_at] = ttl - n_hops
            if version == 4:  # RFC 1624 incremental update of the header checksum
                total = ((buf[10] << 8) | buf[11]) + (n_hops << 8)
                total = (total & 0xFFFF) + (total >> 16)
                buf[10], buf[11] = total >> 8, total & 0xFF
            packet = bytes(buf)
        self.stats["forwarded"] += 1
        due = self.delay(d, now)
        self.schedule(due, d.out_fd, packet)
        if d.duplicate and self.rng.random() < d.duplicate:
            self.stats["duplicated"] += 1
            self.schedule(due, d.out_fd, packet)

    def expire(self, packet: bytes, route: Route, forward: bool, hop: int, version: int, now: int) -> None:
        """The packet's TTL runs out at emulated hop `hop` (1-based) of its direction: answer Time
        Exceeded back the other way, `hop` shares of the way there and back later."""
        if version == 4:
            if icmp_errors.is_icmp_error_v4(packet):
                return
        elif icmp_errors.is_icmp_error_v6(packet):
            return
        there, back = (route.forward, route.reverse) if forward else (route.reverse, route.forward)
        share = hop / (there.n_hops + 1)
        rng = self.rng
        lost = (there.loss + back.loss) * share + there.hop_loss[hop - 1]
        if lost and rng.random() < lost:
            self.stats["lost"] += 1
            return
        rtt = there.delay_ns + back.delay_ns
        if there.jitter_ns or back.jitter_ns:
            rtt += int(rng.gauss(0.0, there.jitter_ns) + rng.gauss(0.0, back.jitter_ns))
        if version == 4:
            reply = icmp_errors.time_exceeded_v4(packet, there.hops4[hop - 1], self.seq)
        else:
            reply = icmp_errors.time_exceeded_v6(packet, there.hops6[hop - 1])
        self.stats["time_exceeded"] += 1
        self.schedule(now + max(0, int(rtt * share)), back.out_fd, reply)

    def drain(self, fd: int, now: int) -> None:
        route, forward = self.readers[fd]
        for _ in range(READ_BATCH):
            try:
                packet = os.read(fd, MAX_PACKET)
            except BlockingIOError:
                return
            if packet:
                self.receive(packet, route, forward, now)

    def accept(self, sock: socket.socket) -> None:
        for _ in range(READ_BATCH):
            try:
                conn, _addr = sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # ECONNABORTED and friends: the peer gave up first
                log(f"accept: {exc}")
                return
            self.stats["accepted"] += 1
            conn.close()

    def send_due(self, now: int) -> None:
        heap = self.heap
        horizon = now + self.lead_ns
        readers = self.readers
        while heap and heap[0][0] <= horizon:
            _due, _seq, fd, packet = heapq.heappop(heap)
            try:
                os.write(fd, packet)
            except OSError:  # a malformed packet or a device going away: dropped, like a router
                self.stats["dropped"] += 1
                continue
            # Writing into a datacenter's TUN runs that namespace's stack in this call, so an echo
            # reply is already queued on the same device: take it now, stamped now. Left until the
            # whole due batch is written, it would carry the batch's write time as false delay.
            reader = readers.get(fd)
            if reader is not None and not reader[1]:
                self.drain(fd, time.monotonic_ns())

    def run(self, wakeup_fd: int) -> None:
        """Wake `lead_ns` before the next due time: the lead tracks how late select() wakes, so
        packets leave on time on average without spinning (a VM's timer wakes late)."""
        fds = [*self.readers, *self.listeners, wakeup_fd]
        heap = self.heap
        while not self.stop_wanted:
            wake_at = 0
            timeout: float | None = None
            if heap:
                wake_at = heap[0][0] - self.lead_ns
                timeout = max(0.0, (wake_at - time.monotonic_ns()) / 1e9)
            readable, _, _ = select.select(fds, [], [], timeout)
            now = time.monotonic_ns()
            if not readable and timeout:
                late = min(max(now - wake_at, 0), MAX_LEAD_NS)
                self.lead_ns += (late - self.lead_ns) // 8
            for fd in readable:
                if fd in self.readers:
                    self.drain(fd, now)
                elif fd in self.listeners:
                    self.accept(self.listeners[fd])
                else:
                    _drain_pipe(wakeup_fd)
            if self.reload_wanted:
                self.reload_wanted = False
                self.reload()
            self.send_due(time.monotonic_ns())


def _drain_pipe(fd: int) -> None:
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass


def log(message: str) -> None:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
    print(f"{stamp} relay[{os.getpid()}]: {message}", file=sys.stderr, flush=True)


def _tighten_timers() -> None:
    """Wake on time: 1 ns timer slack (else select() may wake 50 µs late) and a low real-time
    priority, so a busy host (tests, benchmarks, fping beside it) does not preempt the relay and
    add its run-queue wait to every RTT. The kernel's RT throttling still bounds it."""
    set_timer_slack(1e-9)
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(RT_PRIORITY))
    except OSError as exc:
        log(f"no real-time priority ({exc.strerror}); RTT noise will follow host load")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="netprobe.lab.relay")
    parser.add_argument("state_dir", type=Path)
    parser.add_argument("--ready-fd", type=int, default=-1)
    args = parser.parse_args(argv)

    def ready(message: str) -> None:
        if args.ready_fd >= 0:
            os.write(args.ready_fd, (message + "\n").encode())
            os.close(args.ready_fd)

    os.chdir("/")
    try:
        relay = Relay(args.state_dir, read_config(args.state_dir))
        relay.open()
    except Exception as exc:  # reported to `lab up`, which tears down and raises LabError
        ready(f"error: {exc}")
        log(f"setup failed: {exc!r}")
        return 1

    rfd, wfd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wfd)

    def on_hup(_sig: int, _frame: FrameType | None) -> None:
        relay.reload_wanted = True

    def on_term(_sig: int, _frame: FrameType | None) -> None:
        relay.stop_wanted = True

    signal.signal(signal.SIGHUP, on_hup)
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    _tighten_timers()
    relay.mark_applied()
    log(f"up: {len(relay.routes)} routes, {len(relay.listeners)} listeners")
    ready(f"ok {os.getpid()}")
    # A full collection walks every object the process holds (pydantic, the spec…) and stalls
    # the relay for milliseconds: every packet in flight then shows a false delay spike. The
    # packet path makes no reference cycles, so freeze what exists and leave the collector off.
    gc.collect()
    gc.freeze()
    gc.disable()
    relay.run(rfd)
    log(f"stopping; {relay.stats}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
