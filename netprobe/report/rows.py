"""The report's rows: per agent × target, a peak and an off-peak window of figures, what the probes
add to them (from their specs' report roles), the worst hour and the 24-hour profile. Computed by
peak.py, ranked by ranking.py, printed by the renderers."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from netprobe.probes import REGISTRY
from netprobe.store.prefix import Extremes, Sums

if TYPE_CHECKING:
    from netprobe.report.slo import SloFigures


def rtt_probes() -> list[str]:
    """Probes that can be a row's RTT source, first choice first (icmp, then an mtr trace's
    destination figures where there is no icmp): their specs' report.rtt_rank."""
    ranked = [(spec.report.rtt_rank, i, name) for i, (name, spec) in enumerate(REGISTRY.items())
              if spec.report.rtt_rank is not None]
    return [name for _, _, name in sorted(ranked)]


def figure_probes() -> dict[str, tuple[tuple[str, str], ...]]:
    """probe → its (report field, rollup figure) pairs (tcp's connect P95, sse's stream figures)."""
    return {name: spec.report.figures for name, spec in REGISTRY.items() if spec.report.figures}


def report_figures() -> list[str]:
    """Every probe figure a window carries, in registry order."""
    return [field for figures in figure_probes().values() for field, _ in figures]


def row_figures() -> list[str]:
    """The probe figures a row repeats at its top level (its peak window's)."""
    return [f for spec in REGISTRY.values() for f in spec.report.on_row]


@dataclass(frozen=True, slots=True)
class WindowFigures:
    """One window (peak or off-peak) of one agent × target, over the days."""

    rtt_p50_ms: float | None          # RTT probe's merged sketch (±1 %)
    rtt_p95_ms: float | None
    rtt_p99_ms: float | None
    jitter_ms: float | None           # mean of the rounds' jitter
    loss_pct: float | None            # 100·(sent − received)/sent over every request of the window
    rounds: int                       # RTT-probe rounds
    hours: int                        # hour rows merged
    samples: int                      # RTT samples behind the quantiles
    # the probes' own figures (report_figures(): tcp_connect_p95_ms, sse_first_event_p95_ms,
    # stalls_per_min, …), read with figure(); absent = None
    extra: Mapping[str, float | None] = field(default_factory=dict)
    merged: MergedHours | None = field(default=None, repr=False, compare=False)   # the merged RTT hours

    def figure(self, name: str) -> float | None:
        """A probe's figure by name (None where the window has none)."""
        return self.extra.get(name)

    def to_dict(self) -> dict[str, Any]:
        return {"rtt_p50_ms": self.rtt_p50_ms, "rtt_p95_ms": self.rtt_p95_ms, "rtt_p99_ms": self.rtt_p99_ms,
                "jitter_ms": self.jitter_ms, "loss_pct": self.loss_pct, "rounds": self.rounds,
                "hours": self.hours, "samples": self.samples,
                **{name: self.extra.get(name) for name in report_figures()}}


@dataclass(frozen=True, slots=True)
class WorstHour:
    hour: datetime                    # local start of the hour (aware, agent's zone)
    loss_pct: float

    def to_dict(self) -> dict[str, Any]:
        return {"hour": self.hour.isoformat(), "loss_pct": self.loss_pct}


@dataclass(frozen=True, slots=True)
class Degradation:
    """Peak minus off-peak (ratio: peak / off-peak); None where either side is missing."""

    rtt_p50_delta_ms: float | None
    rtt_p95_delta_ms: float | None
    rtt_p95_ratio: float | None
    jitter_delta_ms: float | None
    loss_delta_pct: float | None

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


@dataclass(frozen=True, slots=True)
class HourProfile:
    """One local hour of day (0–23), merged over the days: the HTML's 24-hour profile."""

    hour: int
    rtt_p5_ms: float | None
    rtt_p50_ms: float | None
    rtt_p95_ms: float | None
    loss_pct: float | None
    rounds: int

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


@dataclass(frozen=True, slots=True)
class PeakRow:
    agent: str
    region: str | None
    timezone: str                     # the zone the windows were taken in
    target: str
    datacenter: str | None
    line: str | None                  # declared (targets.line)
    detected_line: str | None         # latest forward route label (mtr); None without mtr
    rtt_probe: str | None             # the probe the RTT comes from (rtt_probes()); None: none measured it
    peak: WindowFigures
    offpeak: WindowFigures
    worst_hour: WorstHour | None      # the peak-window hour with the most loss
    degradation: Degradation
    profile: Sequence[HourProfile] = field(repr=False)      # local hours 0–23 (empty: not read)
    score_ms: float | None = None     # ranking score (ranking.py); lower is better
    rank: int | None = None           # 1 = best within the region; None when there is no peak RTT
    return_line: str | None = None    # latest return route label (rmtr: the way back); None without rmtr
    slo: SloFigures | None = None     # SLO attainment (report/slo.py), when asked for

    @property
    def asymmetric(self) -> bool | None:
        """The way out and the way back on different lines; None unless both were traced."""
        if self.detected_line is None or self.return_line is None:
            return None
        return self.detected_line != self.return_line

    @property
    def line_mismatch(self) -> bool:
        return self.line is not None and self.detected_line is not None and self.line != self.detected_line

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent, "region": self.region, "timezone": self.timezone, "target": self.target,
            "datacenter": self.datacenter, "line": self.line, "detected_line": self.detected_line,
            "line_fwd": self.detected_line, "line_ret": self.return_line, "asymmetric": self.asymmetric,
            "rtt_probe": self.rtt_probe, "peak": self.peak.to_dict(), "offpeak": self.offpeak.to_dict(),
            "worst_hour": self.worst_hour.to_dict() if self.worst_hour is not None else None,
            **{name: self.peak.figure(name) for name in row_figures()},
            "degradation": self.degradation.to_dict(), "score_ms": self.score_ms, "rank": self.rank,
            "profile": [p.to_dict() for p in self.profile],
            "attainment_pct": self.slo.attainment_pct if self.slo is not None else None,
            "slo": self.slo.to_dict() if self.slo is not None else None,
        }


@dataclass(slots=True)
class MergedHours:
    """Hours of one series merged: how many, the extremes; the summed bins are made only when asked
    (the line comparison merges them)."""

    hours: int
    extremes: Extremes | None
    make: Callable[[], Sums] = field(repr=False)
    _sums: Sums | None = None

    @property
    def sums(self) -> Sums:
        if self._sums is None:
            self._sums = self.make()
        return self._sums

    @property
    def lo(self) -> float | None:
        return self.extremes[0] if self.extremes else None

    @property
    def hi(self) -> float | None:
        return self.extremes[1] if self.extremes else None
