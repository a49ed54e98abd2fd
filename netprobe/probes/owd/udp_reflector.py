"""The owd reflector (docs/probes.md): answers authenticated owd requests with its receive and send times
and what it has seen of the session, from one UDP socket, with bounded memory and work.

Bounds: at most `max_sessions` sessions (the least recently used goes first; one idle for
`session_idle_s` is dropped when met), each a 2 KiB bitmap of the sequence numbers seen
(seq < MAX_SEQ); per key a token bucket of `rate_pps` packets. Replays: a request is answered once
(its bit in the bitmap) and only within `max_age_s` of when it was sent. Anything else is counted under
its reason in `bad` and dropped, without a reply: a reply only ever answers an authentic request,
and is exactly as large as it (packets.SIZE).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field

from netprobe.net import pktinfo, rxstamp
from netprobe.probes.owd import packets
from netprobe.probes.owd.packets import BadPacket, Kind, Packet

MAX_SEQ = 16384
RCVBUF = 2 << 20                # bytes; about a second of 2,000 requests/s queued (the kernel doubles it)
_ANC_SPACE = rxstamp.ANC_SPACE + pktinfo.ANC_SPACE


@dataclass(slots=True)
class _Session:
    seen: bytearray = field(default_factory=lambda: bytearray(MAX_SEQ // 8))
    received: int = 0
    reordered: int = 0
    duplicates: int = 0
    top: int = -1
    last: float = 0.0


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at: float


@dataclass(frozen=True, slots=True)
class Limits:
    """`max_age_s`: a request sent (t1, the agent's clock) further than this from its arrival (t2,
    ours) is refused as stale, so a captured request replayed later gets no answer; within it, the
    session's bitmap still holds the sequence number (sessions live longer than that when idle) and
    the replay is a duplicate, counted and unanswered. Generous, for agents whose clocks drift."""

    max_sessions: int = 4096
    max_age_s: float = 600.0
    session_idle_s: float = 660.0
    rate_pps: float = 200.0          # per key: a round at 10 ms intervals is 100 pps
    burst: float = 400.0


class Reflector:
    """`keys`: key id → owd key (packets.key_id / derive_key). Counters: `replies` and `bad`."""

    def __init__(self, keys: Mapping[bytes, bytes], limits: Limits = Limits()) -> None:
        self.keys = dict(keys)
        self.limits = limits
        self.sessions: OrderedDict[tuple[bytes, int], _Session] = OrderedDict()
        self.buckets: dict[bytes, _Bucket] = {}
        self.replies = 0
        self.bad: Counter[str] = Counter()

    def handle(self, data: bytes, t2: int, now: float) -> bytes | None:
        """The reply to one datagram received at t2 (ns), or None (counted in `bad` if not valid)."""
        try:
            kid = packets.peek_key_id(data)
            key = self.keys.get(kid)
            if key is None:
                raise BadPacket("key")
            p = packets.decode(data, key)
            if p.kind not in (Kind.REQUEST, Kind.STATUS):
                raise BadPacket("kind")
            if p.seq >= MAX_SEQ:
                raise BadPacket("seq")
            if abs(t2 - p.t1) > self.limits.max_age_s * 1e9:
                raise BadPacket("stale")
            if not self._admit(kid, now):
                raise BadPacket("rate")
        except BadPacket as exc:
            self.bad[exc.reason] += 1
            return None
        s = self._session(kid, p.session, now)
        if p.kind is Kind.REQUEST:
            byte, bit = divmod(p.seq, 8)
            if s.seen[byte] >> bit & 1:
                s.duplicates += 1       # not answered: a second reply would read as a return duplicate
                return None
            s.seen[byte] |= 1 << bit
            s.received += 1
            if p.seq < s.top:
                s.reordered += 1
            s.top = max(s.top, p.seq)
        kind = Kind.REPLY if p.kind is Kind.REQUEST else Kind.STATUS_REPLY
        self.replies += 1
        return packets.encode(Packet(kind, kid, p.session, p.seq, p.t1, t2, time.time_ns(), s.received,
                                     s.reordered, s.duplicates), key)

    def _admit(self, kid: bytes, now: float) -> bool:
        lim = self.limits
        b = self.buckets.get(kid)
        if b is None:
            b = self.buckets[kid] = _Bucket(lim.burst, now)
        b.tokens = min(lim.burst, b.tokens + (now - b.at) * lim.rate_pps)
        b.at = now
        if b.tokens < 1.0:
            return False
        b.tokens -= 1.0
        return True

    def _session(self, kid: bytes, session: int, now: float) -> _Session:
        k = (kid, session)
        s = self.sessions.get(k)
        if s is not None and now - s.last > self.limits.session_idle_s:
            s = None                    # an old session id come back: start afresh
        if s is None:
            s = self.sessions[k] = _Session()
        self.sessions.move_to_end(k)
        s.last = now
        while len(self.sessions) > self.limits.max_sessions:
            self.sessions.popitem(last=False)
        while self.sessions:            # the idle ones at the old end
            first = next(iter(self.sessions.values()))
            if now - first.last <= self.limits.session_idle_s:
                break
            self.sessions.popitem(last=False)
        return s


class ReflectorSocket:
    """The reflector on a bound UDP socket, answered from a thread of its own that blocks in
    `recvmsg`; close() stops it. Not a reader in the event loop: a request waited there for the
    loop's wake-up and dispatch as well as its own (the hold t3 − t2 was longer through the loop), and
    the hold is what the reflector adds between its two stamps. The
    thread touches only the Reflector; SIGHUP swaps its keys by one assignment. The socket blocks
    without a timeout (one syscall per request, not a poll and a read); close() wakes it with an
    empty datagram of its own."""

    def __init__(self, reflector: Reflector, sock: socket.socket) -> None:
        self.reflector = reflector
        self.sock = sock
        sock.setblocking(True)
        rxstamp.enable(sock)
        # the destination of each request matters only on a wildcard bind; bound to one address, replies
        # leave from it anyway, and the ancillary data in and out is work per request for nothing
        self._pktinfo = self.address[0] in ("0.0.0.0", "::") and pktinfo.enable(sock)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="owd-reflector", daemon=True)
        self._thread.start()

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.sock.getsockname()[:2]
        return str(host), int(port)

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                data, anc, flags, addr = self.sock.recvmsg(packets.SIZE + 1, _ANC_SPACE)
            except OSError:             # an ICMP error for an earlier reply: nothing to do
                continue
            if self._stop.is_set():
                return
            t2 = rxstamp.rx_ns(anc) or time.time_ns()
            if flags & socket.MSG_TRUNC:
                self.reflector.bad["size"] += 1
                continue
            reply = self.reflector.handle(data, t2, time.monotonic())
            if reply is not None:
                # from the address the request went to: bound to a wildcard on a host of several
                # addresses, the kernel would pick the source by route, and the agent's connected
                # socket would drop the reply as a stranger's
                source = pktinfo.reply_from(anc) if self._pktinfo else []
                try:
                    self.sock.sendmsg([reply], source, 0, addr)
                except OSError:         # the way back is down: the agent counts a return loss
                    self.reflector.bad["send"] += 1

    def close(self) -> None:
        self._stop.set()
        host, port = self.address
        if host in ("0.0.0.0", "::"):
            host = "127.0.0.1" if self.sock.family == socket.AF_INET else "::1"
        with contextlib.suppress(OSError), socket.socket(self.sock.family, socket.SOCK_DGRAM) as wake:
            wake.sendto(b"", (host, port))
        self._thread.join(2.0)
        self.sock.close()


def bind(host: str, port: int) -> socket.socket:
    """The reflector's socket, with a receive buffer of RCVBUF (the kernel caps it at
    net.core.rmem_max): requests that arrive while the reflector is held off the CPU wait there and are
    answered late, their t2 still their arrival; beyond it they would be dropped and read as forward
    loss (the default buffer dropped thousands of requests in one stall of a loaded VM)."""
    info = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM, flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(info[0], socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
    sock.bind(info[4])
    return sock


__all__ = ["MAX_SEQ", "Limits", "Reflector", "ReflectorSocket", "bind"]
