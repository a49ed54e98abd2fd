"""The stream figures of docs/numbers.md (sse): gaps, stalls, delay variation, TPOT; ms floats."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence

from netprobe.stats import percentile


def gaps(times_ms: Sequence[float]) -> list[float]:
    """Time between consecutive content events (arrival times in ms, in stream order)."""
    return [b - a for a, b in itertools.pairwise(times_ms)]


def gap_summary(gaps: Sequence[float]) -> dict[str, float] | None:
    """`{p50, p95, p99, max}` of the gaps; None when there are none (fewer than two events)."""
    if not gaps:
        return None
    s = sorted(gaps)
    return {"p50": percentile(s, 50), "p95": percentile(s, 95), "p99": percentile(s, 99), "max": s[-1]}


class _RunningMedian:
    """Median of everything added so far: a max-heap of the lower half, a min-heap of the upper half."""

    def __init__(self) -> None:
        self._lo: list[float] = []  # negated, so heapq's min-heap acts as a max-heap
        self._hi: list[float] = []

    def add(self, x: float) -> None:
        if self._lo and x > -self._lo[0]:
            heapq.heappush(self._hi, x)
        else:
            heapq.heappush(self._lo, -x)
        # Keep len(lo) == len(hi) or len(hi) + 1.
        if len(self._lo) > len(self._hi) + 1:
            heapq.heappush(self._hi, -heapq.heappop(self._lo))
        elif len(self._hi) > len(self._lo):
            heapq.heappush(self._lo, -heapq.heappop(self._hi))

    def median(self) -> float:
        """Middle value, or the mean of the two middle ones (NumPy's median); needs at least one value."""
        if len(self._lo) > len(self._hi):
            return -self._lo[0]
        return (-self._lo[0] + self._hi[0]) / 2.0


def stalls(gaps: Sequence[float], abs_ms: float = 250.0, k: float = 4.0) -> tuple[int, float]:
    """Count and total ms of the stalls: gaps with gap > max(abs_ms, k × running median).

    The running median is taken over the gaps *before* the one judged, so a stall never raises its own
    threshold (a long pause cannot hide itself); the first gap is judged against `abs_ms` alone. Earlier
    stalls do enter the median of later gaps — the median shrugs off a few outliers, and a stream that
    keeps pausing has a new normal. The total is the whole length of each stalled gap. O(n log n).
    """
    count = 0
    total = 0.0
    seen = _RunningMedian()
    for i, g in enumerate(gaps):
        threshold = abs_ms if i == 0 else max(abs_ms, k * seen.median())
        if g > threshold:
            count += 1
            total += g
        seen.add(g)
    return count, total


def delay_variation(arrival_ms: Sequence[float], server_ts_ms: Sequence[float]) -> dict[str, float] | None:
    """`{p50, p95}` of dᵢ − min(d) with dᵢ = arrivalᵢ − tsᵢ: one-way delay variation, clock offset cancelled.

    Arrival times and server timestamps are pairs of the same events (same length); None when empty.
    """
    if len(arrival_ms) != len(server_ts_ms):
        raise ValueError(f"{len(arrival_ms)} arrival times but {len(server_ts_ms)} server timestamps")
    if not arrival_ms:
        return None
    d = sorted(a - t for a, t in zip(arrival_ms, server_ts_ms, strict=True))
    base = d[0]
    v = [x - base for x in d]
    return {"p50": percentile(v, 50), "p95": percentile(v, 95)}


def tpot(first_ms: float, last_ms: float, n: int) -> float | None:
    """Time per output token: (last − first)/(n − 1) over n content events; None for fewer than two."""
    if n < 2:
        return None
    return (last_ms - first_ms) / (n - 1)
