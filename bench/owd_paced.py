"""bench/owd.py's paced load: many agents' owd requests sent on time, as from many machines.

Independent agents on their own machines do not send in bunches: agent i's k-th request leaves at its
own phase, i·interval/N + k·interval (`phases="even"`; "random": each agent's phase drawn once,
uniform over an interval), plus, with `jitter_us`, a uniform offset of ± that per request, as real
timers have. One loop, pinned to a core of its own, sends every agent's requests in time order from the
agent's own connected socket (netprobe's packet format, keys and HMAC): it sleeps (timer slack 1 ns)
until SPIN_NS before each send, then spins on the clock, and reads replies only in the gaps, which
costs them nothing: their arrival time t4 is the kernel's stamp, taken when they came. Each send's
lateness against its schedule is kept, to show the load was even. The replies go through netprobe's
own client code (client.take) into one Exchange per agent, and their figures through
netprobe.probes.owd.figures, as an agent's round would.

`raw=True` sends 88 bytes of nothing on the same schedule and reads nothing back: the load for the
bare-Python reference echo.
"""

from __future__ import annotations

import ctypes
import gc
import os
import random
import select
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from netprobe.net import rxstamp
from netprobe.probes.owd import packets
from netprobe.probes.owd.client import STATUS_TRIES, Exchange, take
from netprobe.probes.owd.packets import Kind, Packet

SPIN_NS = 150_000               # wake this long before a send and spin the rest (a VM's wake-up is late)
_PR_SET_TIMERSLACK = 29


@dataclass(slots=True)
class Agent:
    key: bytes
    kid: bytes
    session: int
    sock: socket.socket
    round: Exchange = field(default_factory=Exchange)
    inbox: list[tuple[bytes, int]] = field(default_factory=list)   # (datagram, t4), decoded at the end


def schedule(agents: int, pps: float, seconds: float, phases: str, jitter_us: float,
             seed: int) -> list[tuple[int, int, int]]:
    """(due ns from the start, agent, seq) for every request, in time order."""
    rng = random.Random(seed)
    interval = 1e9 / pps
    count = int(seconds * pps)
    offsets = ([i * interval / agents for i in range(agents)] if phases == "even"
               else [rng.uniform(0, interval) for _ in range(agents)])
    out = []
    for i, phase in enumerate(offsets):
        for k in range(count):
            jitter = rng.uniform(-jitter_us, jitter_us) * 1e3 if jitter_us else 0.0
            out.append((max(0, int(phase + k * interval + jitter)), i, k))
    out.sort()
    return out


def _precise_sleeps() -> None:
    """Timer slack 1 ns (default 50 µs), and SCHED_FIFO when allowed: the sender is the load, not the
    system under test, and other work on a shared machine must not decide when a request leaves."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_TIMERSLACK, 1, 0, 0, 0)
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(20))
    except OSError:
        pass


def run(port: int, keys: list[bytes], plan: list[tuple[int, int, int]], timeout: float = 2.0,
        raw: bool = False) -> tuple[list[Exchange], list[int]]:
    """Send `plan` to the reflector at 127.0.0.1:`port`; each agent's round, and every send's lateness
    (ns) against its schedule, in send order."""
    _precise_sleeps()
    agents = []
    poller = select.epoll()
    by_fd: dict[int, Agent] = {}
    for key in keys:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.setblocking(False)
        rxstamp.enable(sock)
        sock.connect(("127.0.0.1", port))
        a = Agent(key, packets.key_id(key), int.from_bytes(os.urandom(8), "big"), sock)
        agents.append(a)
        by_fd[sock.fileno()] = a
        if not raw:                     # the reference's echoes are left to overflow, unread
            poller.register(sock.fileno(), select.EPOLLIN)
    junk = b"x" * packets.SIZE
    late = []
    gc.collect()
    gc.disable()                        # a full collection mid-run would be a stall of the load's own
    start = time.monotonic_ns() + 200_000_000
    try:
        for due_off, i, seq in plan:
            due = start + due_off
            _drain(poller, by_fd, until=due - SPIN_NS)
            rest = due - SPIN_NS - time.monotonic_ns()
            if rest > 0:
                time.sleep(rest / 1e9)
            now = time.monotonic_ns()
            while now < due:
                now = time.monotonic_ns()
            late.append(now - due)
            a = agents[i]
            data = junk if raw else packets.encode(
                Packet(Kind.REQUEST, a.kid, a.session, seq, time.time_ns()), a.key)
            _send(a, data)
            a.round.sent += 1
        if not raw:
            _finish(agents, poller, by_fd, timeout)
    finally:
        gc.enable()
        poller.close()
        for a in agents:
            a.sock.close()
    return [a.round for a in agents], late


def _finish(agents: list[Agent], poller: select.epoll, by_fd: dict[int, Agent], timeout: float) -> None:
    """As the client ends a round: wait for the replies still out, then ask each session's status."""
    want = sum(a.round.sent for a in agents)
    _wait(poller, by_fd, timeout, lambda: sum(len(a.inbox) for a in agents) >= want)
    for a in agents:
        _take_inbox(a)
    for _ in range(STATUS_TRIES):
        asking = [a for a in agents if not a.round.status_answered]
        if not asking:
            break
        for a in asking:
            _send(a, packets.encode(Packet(Kind.STATUS, a.kid, a.session, 0, time.time_ns()), a.key))
        _wait(poller, by_fd, timeout / STATUS_TRIES, lambda ask=asking: all(a.inbox for a in ask))
        for a in asking:
            _take_inbox(a)


def _take_inbox(a: Agent) -> None:
    for data, t4 in a.inbox:
        take(a.round, data, t4, a.key, a.kid, a.session)
    a.inbox.clear()


def _wait(poller: select.epoll, by_fd: dict[int, Agent], timeout: float, done: Callable[[], bool]
          ) -> None:
    end = time.monotonic() + timeout
    while not done() and time.monotonic() < end:
        _drain(poller, by_fd, until=None, block=min(0.05, max(0.0, end - time.monotonic())))


def _drain(poller: select.epoll, by_fd: dict[int, Agent], until: int | None, block: float = 0.0) -> None:
    """Read what has arrived, but stop by `until` (monotonic ns): the next send comes first."""
    for fd, _ in poller.poll(block):
        a = by_fd[fd]
        while until is None or time.monotonic_ns() < until:
            try:
                data, anc, _flags, _addr = a.sock.recvmsg(packets.SIZE + 1, rxstamp.ANC_SPACE)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:
                a.round.error = a.round.error or os.strerror(exc.errno or 0)
                continue
            a.inbox.append((data, rxstamp.rx_ns(anc) or time.time_ns()))


def _send(a: Agent, data: bytes) -> None:
    try:
        a.sock.send(data)
    except OSError as exc:
        a.round.error = a.round.error or os.strerror(exc.errno or 0)
