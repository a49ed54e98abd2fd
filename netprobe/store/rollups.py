"""Hourly rollups: what one round adds to its hour, and how hours merge into any window."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from ddsketch import DDSketch

from netprobe.probes import REGISTRY
from netprobe.probes.base import RollupFigure
from netprobe.stats import loss_pct
from netprobe.store import sketch as sketches
from netprobe.store.envelopes import Envelope

HourKey = tuple[str, str, str, datetime]      # agent_id, target_id, probe, UTC hour start
HOUR = timedelta(hours=1)


def hour_of(ts: datetime) -> datetime:
    return ts.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def key_of(env: Envelope) -> HourKey:
    return (str(env.agent["id"]), str(env.target["id"]), env.probe, hour_of(env.started_at))


@dataclass(slots=True)
class Rollup:
    """Mergeable counters of one or more hours (sums, not averages, so merging is exact)."""

    rounds: int = 0
    error_rounds: int = 0            # status down or error
    sent: int = 0
    received: int = 0
    duplicates: int = 0
    loss_pct_sum: float = 0.0        # per-round loss, over rounds that sent something
    loss_rounds: int = 0
    rtt_min: float | None = None
    rtt_max: float | None = None
    rtt_sum: float = 0.0
    rtt_count: int = 0
    jitter_sum: float = 0.0
    jitter_count: int = 0
    sketch: DDSketch | None = field(default=None, repr=False, compare=False)
    extras: dict[str, list[float]] = field(default_factory=dict)   # name -> [sum, count]

    def add(self, env: Envelope, *, sketch: bool = True) -> None:
        """Count one round in; `sketch=False` leaves its samples out of the sketch (the caller adds
        them in bulk, sketches.add_all, which is what accumulate does)."""
        self.rounds += 1
        self.error_rounds += env.status != "ok"
        self.sent += env.sent
        self.received += env.received
        self.duplicates += env.duplicates
        if env.sent > 0:
            own = env.loss_pct
            self.loss_pct_sum += own if own is not None else loss_pct(env.sent, env.received)
            self.loss_rounds += 1
        if env.jitter_ms is not None:
            self.jitter_sum += env.jitter_ms
            self.jitter_count += 1
        if env.samples_ms:
            if sketch:
                if self.sketch is None:
                    self.sketch = sketches.new_sketch()
                sketches.add_all(self.sketch, env.samples_ms)
            self._extend(min(env.samples_ms), max(env.samples_ms), sum(env.samples_ms), len(env.samples_ms))
        spec = REGISTRY.get(env.probe)
        if spec is not None and spec.rollup_extras is not None:
            for name, value in spec.rollup_extras(env.result):
                self._add_extra(name, value, 1)

    def _add_extra(self, name: str, total: float, n: int) -> None:
        slot = self.extras.setdefault(name, [0.0, 0])
        slot[0] += total
        slot[1] += n

    def merge(self, other: Rollup) -> None:
        self.rounds += other.rounds
        self.error_rounds += other.error_rounds
        self.sent += other.sent
        self.received += other.received
        self.duplicates += other.duplicates
        self.loss_pct_sum += other.loss_pct_sum
        self.loss_rounds += other.loss_rounds
        self.jitter_sum += other.jitter_sum
        self.jitter_count += other.jitter_count
        if other.rtt_count and other.rtt_min is not None and other.rtt_max is not None:
            self._extend(other.rtt_min, other.rtt_max, other.rtt_sum, other.rtt_count)
        if other.sketch is not None:
            if self.sketch is None:
                self.sketch = sketches.new_sketch()
            self.sketch.merge(other.sketch)
        for name, (total, n) in other.extras.items():
            self._add_extra(name, total, int(n))

    def _extend(self, lo: float, hi: float, total: float, n: int) -> None:
        self.rtt_min = lo if self.rtt_min is None else min(self.rtt_min, lo)
        self.rtt_max = hi if self.rtt_max is None else max(self.rtt_max, hi)
        self.rtt_sum += total
        self.rtt_count += n

    # -- database row <-> Rollup --------------------------------------------------------------
    _COLUMNS = ("rounds", "error_rounds", "sent", "received", "duplicates", "loss_pct_sum", "loss_rounds",
                "rtt_min", "rtt_max", "rtt_sum", "rtt_count", "jitter_sum", "jitter_count")

    @classmethod
    def from_row(cls, row: Mapping[str, Any], *, sketch: bool = True) -> Rollup:
        """`sketch=False`: the counters alone (the caller merges the sketch's text itself)."""
        r = cls(**{c: row[c] for c in cls._COLUMNS})
        r.sketch = sketches.loads(row["sketch"]) if sketch and row["sketch"] else None
        r.extras = json.loads(row["extras"]) if row.get("extras") else {}
        return r

    def to_row(self) -> dict[str, Any]:
        values = {c: getattr(self, c) for c in self._COLUMNS}
        values["sketch"] = sketches.dumps(self.sketch) if self.sketch is not None else None
        values["extras"] = json.dumps(self.extras, separators=(",", ":")) if self.extras else None
        return values

    # -- derived figures ------------------------------------------------------------------------
    def quantile(self, q: float) -> float | None:
        """q in 0..1 from the sketch, clamped to the exact min/max it cannot exceed."""
        if self.sketch is None or self.sketch.count == 0:
            return None
        raw = self.sketch.get_quantile_value(q)
        if raw is None:
            return None
        value = float(raw)
        if self.rtt_min is not None and self.rtt_max is not None:
            value = min(max(value, self.rtt_min), self.rtt_max)
        return value

    def figures(self) -> dict[str, Any]:
        return {
            "rounds": self.rounds,
            "error_rounds": self.error_rounds,
            "sent": self.sent,
            "received": self.received,
            "duplicates": self.duplicates,
            "loss_pct": loss_pct(self.sent, self.received) if self.sent else None,
            "loss_pct_mean": self.loss_pct_sum / self.loss_rounds if self.loss_rounds else None,
            "samples": self.rtt_count,
            "rtt_min_ms": self.rtt_min,
            "rtt_max_ms": self.rtt_max,
            "rtt_avg_ms": self.rtt_sum / self.rtt_count if self.rtt_count else None,
            "rtt_p50_ms": self.quantile(0.50),
            "rtt_p95_ms": self.quantile(0.95),
            "rtt_p99_ms": self.quantile(0.99),
            "jitter_ms": self.jitter_sum / self.jitter_count if self.jitter_count else None,
            # then every registered probe's own figures (sse: gap_p95_ms, stalls_per_min, …), None
            # where this span has none, so every row carries the same keys
            **{f.name: self._derived(f) for f in rollup_figures()},
        }

    def _derived(self, f: RollupFigure) -> float | None:
        total, count = self.extras.get(f.extra, (0.0, 0))
        if f.per is None:
            return total / count if count else None
        per, n = self.extras.get(f.per, (0.0, 0))
        return total / (per / f.per_scale) if n and per > 0 else None


def rollup_figures() -> list[RollupFigure]:
    """The figures rollups derive from probes' extras, every registered probe's in registry order."""
    return [f for spec in REGISTRY.values() for f in spec.rollup_figures]


def _counted(envelopes: Iterable[Envelope]) -> tuple[dict[HourKey, Rollup], dict[HourKey, list[float]]]:
    """Each hour's counters (Rollups without a sketch) and its samples, gathered in order."""
    out: dict[HourKey, Rollup] = {}
    samples: dict[HourKey, list[float]] = {}
    for env in envelopes:
        key = key_of(env)
        rollup = out.get(key)
        if rollup is None:
            rollup = out[key] = Rollup()
        rollup.add(env, sketch=False)
        if env.samples_ms:
            values = samples.get(key)
            if values is None:
                samples[key] = list(env.samples_ms)
            else:
                values.extend(env.samples_ms)
    return out, samples


def accumulate(envelopes: Iterable[Envelope]) -> dict[HourKey, Rollup]:
    """Each hour's rollup of `envelopes`. The samples of an hour are gathered in order and sketched
    once at the end (sketches.add_all: the same sketch as adding them one by one)."""
    out, samples = _counted(envelopes)
    for key, values in samples.items():
        rollup = out[key]
        rollup.sketch = sketches.new_sketch()
        sketches.add_all(rollup.sketch, values)
    return out


def hour_deltas(envelopes: Iterable[Envelope]) -> dict[HourKey, tuple[Rollup, sketches.Bins | None]]:
    """accumulate, for the writers: each hour's counters (a Rollup without a sketch) and its sketch as
    Bins (None without samples), the very content accumulate's sketch holds, without building one."""
    out, samples = _counted(envelopes)
    bins_of = sketches.bins_of
    return {key: (rollup, bins_of(values) if (values := samples.get(key)) else None)
            for key, rollup in out.items()}
