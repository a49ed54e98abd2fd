"""The numbers of docs/numbers.md, computed exactly as defined there (and nowhere else)."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (NumPy's default); `sorted_values` ascending."""
    n = len(sorted_values)
    if n == 0:
        raise ValueError("percentile of no values")
    if not 0.0 <= q <= 100.0:
        raise ValueError("q must be within 0..100")
    pos = (n - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, n - 1)
    frac = pos - lo
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac


@dataclass(frozen=True, slots=True)
class RttStats:
    """min/avg/p50/p95/max/stdev (population) of the successful samples, in ms."""

    min: float
    avg: float
    p50: float
    p95: float
    max: float
    stdev: float

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def rtt_stats(values: Sequence[float]) -> RttStats | None:
    """Summary of the received samples; None when nothing was received."""
    if not values:
        return None
    s = sorted(values)
    n = len(s)
    avg = math.fsum(s) / n
    var = math.fsum((v - avg) ** 2 for v in s) / n
    return RttStats(min=s[0], avg=avg, p50=percentile(s, 50), p95=percentile(s, 95), max=s[-1],
                    stdev=math.sqrt(var))


def jitter(samples: Sequence[float | None]) -> float | None:
    """Mean |RTTᵢ − RTTᵢ₋₁| over consecutive *received* replies (mtr's Javg); lost ones are skipped."""
    got = [v for v in samples if v is not None]
    if len(got) < 2:
        return None
    return math.fsum(abs(b - a) for a, b in itertools.pairwise(got)) / (len(got) - 1)


def loss_pct(sent: int, received: int) -> float:
    """100·(sent−received)/sent; 0 sent is 0 % (nothing was attempted)."""
    if sent <= 0:
        return 0.0
    return 100.0 * (sent - received) / sent


Z95 = 1.6448536269514722   # the standard normal's 95th percentile


@dataclass(frozen=True, slots=True)
class LogNormal:
    """exp(N(mu, sigma²)) in ms; sigma 0 is the constant exp(mu) (0 ms when p50 is 0)."""

    mu: float
    sigma: float
    zero: bool = False      # the constant 0

    @classmethod
    def through(cls, p50: float, p95: float) -> LogNormal:
        """The log-normal whose median is p50 and 95th percentile p95 (p95 == p50: a constant)."""
        if p50 <= 0:
            return cls(0.0, 0.0, zero=True)
        return cls(math.log(p50), math.log(p95 / p50) / Z95)

    def quantile(self, q: float) -> float:
        """The value at probability q (0 < q < 1)."""
        if self.zero:
            return 0.0
        from statistics import NormalDist

        return math.exp(self.mu + self.sigma * NormalDist().inv_cdf(q)) if self.sigma else math.exp(self.mu)

    def draw(self, rng: random.Random) -> float:
        if self.zero:
            return 0.0
        return rng.lognormvariate(self.mu, self.sigma) if self.sigma else math.exp(self.mu)


def lognormal_option(text: str, option: str) -> LogNormal:
    """An option's `P50` (a constant) or `P50,P95` (a log-normal through both), in ms; a UsageError
    naming `option` otherwise."""
    from netprobe.errors import UsageError

    parts = text.split(",")
    try:
        values = [float(p) for p in parts]
    except ValueError:
        raise UsageError(f"{option}: expected P50 or P50,P95 in ms, got {text!r}") from None
    if len(values) not in (1, 2) or any(not v >= 0 or v == math.inf for v in values):
        raise UsageError(f"{option}: expected P50 or P50,P95 in ms (finite, not negative), got {text!r}")
    p50, p95 = values[0], values[-1]
    if p95 < p50:
        raise UsageError(f"{option}: the P95 ({p95:g}) is below the P50 ({p50:g})")
    if p50 == 0 and p95 > 0:
        raise UsageError(f"{option}: a log-normal needs a positive P50, got 0 with a P95 of {p95:g}")
    return LogNormal.through(p50, p95)
