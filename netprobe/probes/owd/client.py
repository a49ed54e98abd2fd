"""The agent side of an owd round: `count` requests `interval` apart to one reflector, the replies
stamped by the kernel on arrival (t4), then the session's status asked for so that forward and
return loss are told apart even for the last requests. Network failures are data (Exchange.error)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from dataclasses import dataclass, field

from netprobe.net import rxstamp
from netprobe.net.pacing import sleep_until
from netprobe.probes.owd import packets
from netprobe.probes.owd.packets import BadPacket, Kind, Packet

STATUS_TRIES = 3
_REPLIES = (Kind.REPLY, Kind.STATUS_REPLY)


@dataclass(frozen=True, slots=True)
class Reply:
    seq: int
    t1: int
    t2: int
    t3: int
    t4: int


@dataclass(slots=True)
class Exchange:
    """What one round saw: requests sent, replies in arrival order (duplicates included), and the
    reflector's own counts (from the status reply, else the highest count any reply carried)."""

    sent: int = 0
    replies: list[Reply] = field(default_factory=list)
    seen_by_reflector: int = 0
    fwd_reordered: int = 0
    fwd_duplicates: int = 0
    status_answered: bool = False
    bad: int = 0
    error: str | None = None


async def exchange(address: tuple[str, int], key: bytes, count: int, interval: float, timeout: float
                   ) -> Exchange:
    """One round against the reflector at `address` (an IP address and port, already resolved)."""
    loop = asyncio.get_running_loop()
    out = Exchange()
    family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
    kid, session = packets.key_id(key), int.from_bytes(os.urandom(8), "big")
    got_status, all_in = asyncio.Event(), asyncio.Event()
    answered: set[int] = set()
    done_sending = False
    sock = socket.socket(family, socket.SOCK_DGRAM)
    try:
        sock.setblocking(False)
        rxstamp.enable(sock)
        sock.connect(address)           # only the reflector's datagrams reach this socket

        def readable() -> None:
            while True:
                try:
                    data, anc, _flags, _addr = sock.recvmsg(packets.SIZE + 1, rxstamp.ANC_SPACE)
                except (BlockingIOError, InterruptedError):
                    return
                except OSError as exc:  # ICMP unreachable for an earlier request
                    out.error = out.error or os.strerror(exc.errno or 0)
                    continue
                p = take(out, data, rxstamp.rx_ns(anc) or time.time_ns(), key, kid, session)
                if p is None:
                    continue
                if p.kind is Kind.STATUS_REPLY:
                    got_status.set()
                elif p.seq < out.sent:
                    answered.add(p.seq)
                    if done_sending and len(answered) == out.sent:
                        all_in.set()

        loop.add_reader(sock.fileno(), readable)
        try:
            start = loop.time()
            for seq in range(count):
                await sleep_until(start + seq * interval)
                _send(sock, Packet(Kind.REQUEST, kid, session, seq, time.time_ns()), key, out)
                out.sent += 1
            done_sending = True
            if len(answered) < out.sent:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(all_in.wait(), timeout)
            for _ in range(STATUS_TRIES):
                _send(sock, Packet(Kind.STATUS, kid, session, 0, time.time_ns()), key, out)
                try:
                    await asyncio.wait_for(got_status.wait(), timeout / STATUS_TRIES)
                    break
                except TimeoutError:
                    continue
        finally:
            loop.remove_reader(sock.fileno())
    finally:
        sock.close()
    return out


def take(out: Exchange, data: bytes, t4: int, key: bytes, kid: bytes, session: int) -> Packet | None:
    """One datagram from the reflector, received at t4 (ns), into the round `out`: the packet, or None
    when it is not an authentic reply of this session (counted in `out.bad`). `kid`: key_id(key)."""
    try:
        p = packets.decode(data, key)
        if p.key_id != kid or p.session != session or p.kind not in _REPLIES:
            raise BadPacket("session")
    except BadPacket:
        out.bad += 1
        return None
    # Counts only grow within a session, so the highest seen is the latest the reflector knew.
    out.seen_by_reflector = max(out.seen_by_reflector, p.received)
    out.fwd_reordered = max(out.fwd_reordered, p.reordered)
    out.fwd_duplicates = max(out.fwd_duplicates, p.duplicates)
    if p.kind is Kind.STATUS_REPLY:
        out.status_answered = True
    elif p.seq < out.sent:
        out.replies.append(Reply(p.seq, p.t1, p.t2, p.t3, t4))
    return p


def _send(sock: socket.socket, p: Packet, key: bytes, out: Exchange) -> None:
    try:
        sock.send(packets.encode(p, key))
    except OSError as exc:              # no route, unreachable: this request is lost, the round goes on
        out.error = out.error or os.strerror(exc.errno or 0)


__all__ = ["Exchange", "Reply", "exchange", "take"]
