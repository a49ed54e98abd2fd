"""An ICMP round, an mtr trace or tcp connects with the event loop stalled on purpose, for lab tests (run
inside the agent namespace): `python -m tests.support.stall icmp ADDRESS COUNT INTERVAL TIMEOUT STALL
WHERE`, `… mtr ADDRESS MODE TIMEOUT STALL WHERE` or `… tcp ADDRESS PORT COUNT TIMEOUT STALL` prints the
outcome as JSON (tcp: the loop blocks in the callback after each connect starts).

WHERE says where the loop blocks once the round's last request is out:
- `loop`: in the next loop callback (a GC pause or a long synchronous step between two callbacks);
- `select`: right after the loop's next select() that finds nothing ready (a GC pause or vCPU stall
  before the loop looks at its timers), with the replies arriving meanwhile;
- `poll` (icmp): while replies come thick and the engine polls the socket from its timer, inside its next
  such read, as it finds the queue empty (a GC pause while the BlockingIOError is built, a vCPU stall
  right after the syscall).
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import time
from dataclasses import asdict
from typing import Any

from netprobe.probes.icmp.engine import QUANTUM_NS, IcmpEngine
from netprobe.probes.mtr.engine import TraceEngine
from netprobe.probes.tcp import runtime as tcp


class _StallOnEmpty:
    """A socket whose next read that finds nothing blocks `seconds` first, once armed."""

    def __init__(self, sock: socket.socket, seconds: float) -> None:
        self._sock, self._seconds, self.armed = sock, seconds, False

    def recvmsg_into(self, *args: Any) -> Any:
        try:
            return self._sock.recvmsg_into(*args)
        except BlockingIOError:
            if self.armed:
                self.armed = False
                time.sleep(self._seconds)
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


async def stalled_round(address: str, count: int, interval: float, timeout: float, stall: float,
                        where: str) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    engine = IcmpEngine(kind="raw")
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    engine._bind_loop()
    fs = engine._socket(family)
    wrapped = _StallOnEmpty(fs.sock, stall)
    fs.sock = wrapped  # type: ignore[assignment]
    send_next, tick = engine._send_next, engine._tick
    sent_all = False

    def send_then_stall(rnd: Any, next_ns: int) -> None:
        nonlocal sent_all
        send_next(rnd, next_ns)
        if len(rnd.sent_ns) == rnd.count:
            sent_all = True
            if where != "poll":
                _stall(loop, stall, where)

    def stall_in_polling_tick() -> None:
        nonlocal sent_all
        if where == "poll" and sent_all and not engine._reading:
            wrapped.armed, sent_all = True, False
        tick()
        if where == "poll" and sent_all and engine._reading:
            # poll from the next tick on, as the engine does once replies come thick (_on_readable)
            engine._stop_reading()
            engine._arm(time.monotonic_ns() + QUANTUM_NS)

    engine._send_next = send_then_stall  # type: ignore[method-assign]
    engine._tick = stall_in_polling_tick  # type: ignore[method-assign]
    t0 = time.monotonic()
    try:
        out = await engine.ping(address, count=count, interval=interval, timeout=timeout)
    finally:
        engine.close()
    return {**asdict(out), "took": time.monotonic() - t0}


def _stall(loop: asyncio.AbstractEventLoop, seconds: float, where: str) -> None:
    """Block the loop as `where` says, from now on (once)."""
    if where == "loop":
        loop.call_soon(time.sleep, seconds)
        return
    selector = loop._selector  # type: ignore[attr-defined]
    select = selector.select

    def select_then_stall(timeout: float | None = None) -> Any:
        events = select(timeout)
        if not events:
            selector.select = select
            time.sleep(seconds)
        return events

    selector.select = select_then_stall
    loop.call_later(0.002, lambda: None)  # wakes the loop before the replies come: a select finds nothing


async def stalled_trace(address: str, mode: str, timeout: float, stall: float, where: str) -> dict[str, Any]:
    """One cycle, every TTL sent at once; the loop stalls once the trace waits for its replies."""
    loop = asyncio.get_running_loop()
    engine = TraceEngine()
    cycle = engine._cycle

    def cycle_then_stall(*args: Any) -> asyncio.Future[None]:
        fut = cycle(*args)
        # call_soon from the future's callback: after the trace's own step, so once it waits
        fut.add_done_callback(lambda _: loop.call_soon(_stall, loop, stall, where))
        return fut

    engine._cycle = cycle_then_stall  # type: ignore[method-assign,assignment]
    t0 = time.monotonic()
    try:
        out = await engine.trace(address, mode=mode, cycles=1, interval=0.001, timeout=timeout,  # type: ignore[arg-type]
                                 max_hops=8)
    finally:
        engine.close()
    return {**asdict(out), "took": time.monotonic() - t0}


async def stalled_connects(address: str, port: int, count: int, timeout: float,
                           stall: float) -> dict[str, Any]:
    start = tcp._Connects._start

    def start_then_stall(self: tcp._Connects, i: int) -> None:
        start(self, i)
        asyncio.get_running_loop().call_soon(time.sleep, stall)

    tcp._Connects._start = start_then_stall  # type: ignore[method-assign]
    settings = tcp.TcpSettings(count=count, interval=0.01, timeout=timeout)
    t0 = time.monotonic()
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    attempts = await tcp._attempts(family, (address, port), settings)
    return {"attempts": [asdict(a) for a in attempts], "took": time.monotonic() - t0}


def main() -> None:
    kind, *args = sys.argv[1:]
    if kind == "tcp":
        address, port, count, timeout, stall = args
        out = asyncio.run(stalled_connects(address, int(port), int(count), float(timeout), float(stall)))
    elif kind == "mtr":
        address, mode, timeout, stall, where = args
        out = asyncio.run(stalled_trace(address, mode, float(timeout), float(stall), where))
    else:
        address, count, interval, timeout, stall, where = args
        out = asyncio.run(stalled_round(address, int(count), float(interval), float(timeout), float(stall),
                                        where))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
