"""The event loop of netprobe's long-running processes: uvloop on Linux, asyncio's own elsewhere.

uvloop (a declared Linux dependency, so never silently absent there) runs the loop in C: its timers
are libuv's, not a heap of Python `TimerHandle`s compared in Python, and a wake-up dispatches its
callbacks without `_run_once`'s Python steps. The agent wakes a few hundred times a second.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Coroutine
from contextvars import Context
from typing import Any, TypeVar, TypeVarTuple, Unpack

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

# uvloop counts a timer's delay in whole milliseconds (rounded) from a clock it reads in whole
# milliseconds (floored), so a timer can fire up to 1.5 ms before its delay has passed by
# time.monotonic() (measured: up to 1.3 ms, half of all timers early). asyncio's never fires early,
# and the probes rely on that: the ICMP engine times its sends by time.monotonic_ns() and would push
# a send found not yet due back by a quantum; a tcp connect's timeout would be up to 1.5 ms short.
EARLY_S = 0.0015

if sys.platform == "linux":
    import uvloop

    class Loop(uvloop.Loop):
        """uvloop with timers that, like asyncio's, never fire before their delay."""

        def call_later(self, delay: float, callback: Callable[[Unpack[Ts]], object], *args: *Ts,
                       context: Context | None = None) -> asyncio.TimerHandle:
            # call_at and asyncio.sleep/timeout come through here too (uvloop's call_at calls it)
            if delay > 0:
                delay += EARLY_S
            handle: asyncio.TimerHandle = super().call_later(delay, callback, *args, context=context)
            return handle

    def new_event_loop() -> asyncio.AbstractEventLoop:
        return Loop()

else:

    def new_event_loop() -> asyncio.AbstractEventLoop:
        return asyncio.new_event_loop()


def run(main: Coroutine[Any, Any, T]) -> T:
    """asyncio.run(main) on this platform's loop."""
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(main)
