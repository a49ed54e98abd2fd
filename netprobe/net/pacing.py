"""Paced sends: the schedule fping's `-p`/`-i` keep, and a send-rate cap that delays rather than drops.

One command with many targets starts target i of N at i·interval/N, so its requests leave evenly
over the interval instead of as one burst per interval: a burst queues later echoes behind earlier
ones (every target's mean RTT grows with its position in the file) and trips ICMP policers, which
read as loss. The cap (a token bucket per address family in the ICMP engine) holds whatever the
schedule asks for, including many agent rounds falling due together at start-up or on a reload.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

# Echo requests per second per address family, unless max_rate / --rate say otherwise: twice
# fping -i 1 (1,000/s), enough for 1,000 targets at 1 Hz with room, and in 10 ms bursts of at most
# 20 packets, well under what ICMP policers in front of hosts and routers' control planes let pass.
DEFAULT_MAX_RATE = 2000.0
# The bucket holds this many seconds' worth of sends: the ICMP engine sends what is due every few
# ms in one batch, so a bucket smaller than two batches would cap below the rate it is set to.
BURST_SECONDS = 0.01


async def sleep_until(when: float) -> None:
    """Sleep until loop time `when` (monotonic); a schedule built on these does not drift."""
    loop = asyncio.get_running_loop()
    delay = when - loop.time()
    if delay > 0:
        await asyncio.sleep(delay)


def offsets(n: int, interval: float) -> list[float]:
    """Seconds after the first target at which target i of n starts: i·interval/n."""
    return [i * interval / n for i in range(n)]


async def launch_paced(items: Sequence[T], interval: float, start: Callable[[T], Coroutine[Any, Any, R]],
                       stop: asyncio.Event | None = None) -> list[asyncio.Task[R]]:
    """Start `start(item)` as a task for each item at its offset (i·interval/N from now).

    Returns the tasks, started; the caller awaits them. Stops launching once `stop` is set (a
    task failed on set-up, say), so an error does not wait for the whole schedule."""
    t0 = asyncio.get_running_loop().time()
    tasks: list[asyncio.Task[R]] = []
    for item, offset in zip(items, offsets(len(items), interval), strict=True):
        await sleep_until(t0 + offset)
        if stop is not None and stop.is_set():
            break
        tasks.append(asyncio.create_task(start(item)))
    return tasks


class RateCap:
    """A token bucket: at most `rate` sends per second on average, `burst` at once.

    Time is passed in (monotonic ns), so the engine reads the clock once per batch and tests can
    drive it without sleeping."""

    __slots__ = ("_last_ns", "_tokens", "burst", "rate")

    def __init__(self, rate: float, now_ns: int = 0) -> None:
        self._tokens = float("inf")  # set_rate trims it to a full bucket
        self._last_ns = now_ns
        self.set_rate(rate)

    def set_rate(self, rate: float) -> None:
        """A new average rate; the burst follows it, and tokens above the new burst are dropped."""
        if rate <= 0:
            raise ValueError("rate must be > 0")
        self.rate = rate
        self.burst = max(1.0, rate * BURST_SECONDS)
        self._tokens = min(self._tokens, self.burst)

    def _refill(self, now_ns: int) -> None:
        if now_ns > self._last_ns:
            self._tokens = min(self.burst, self._tokens + (now_ns - self._last_ns) * self.rate / 1e9)
            self._last_ns = now_ns

    def take(self, now_ns: int) -> bool:
        """Spend one send if the bucket allows it now."""
        self._refill(now_ns)
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False

    def next_ns(self, now_ns: int) -> int:
        """When the next send will be allowed (now, if it already is)."""
        self._refill(now_ns)
        if self._tokens >= 1.0:
            return now_ns
        return now_ns + int((1.0 - self._tokens) * 1e9 / self.rate) + 1


def stretched_round(n: int, count: int, interval: float, timeout: float, rate: float) -> tuple[float, float]:
    """(seconds between one target's requests, seconds a round takes) for n targets under `rate`.

    Without the cap every target sends every `interval`; with n/rate > interval the cap stretches
    that to n/rate, and the last request of the last target leaves about count·n/rate after the first."""
    spacing = max(interval, n / rate)
    return spacing, (count - 1) * spacing + spacing * (n - 1) / n + timeout
