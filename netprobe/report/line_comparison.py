"""Lines compared per region and datacenter (CN2 GIA vs BGP vs 163 …): the rows' peak and off-peak
sketches merged across the region's agents, so each figure is a true quantile of all their samples."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from netprobe.store.hour_arrays import figures
from netprobe.store.prefix import Sums

from .rows import MergedHours, PeakRow

UNDECLARED = "undeclared"


@dataclass(frozen=True, slots=True)
class LineFigures:
    region: str | None
    datacenter: str | None
    line: str                      # declared, else detected, else "undeclared"
    targets: tuple[str, ...]
    agents: tuple[str, ...]
    peak_p50_ms: float | None
    peak_p95_ms: float | None
    peak_loss_pct: float | None
    offpeak_p95_ms: float | None
    offpeak_loss_pct: float | None
    return_lines: tuple[str, ...] = ()   # the lines the group's targets come back on (rmtr), if traced

    def label(self) -> str:
        """The line, and the way back where it was traced and is another: `cn2-gia ↩ 163`."""
        back = [r for r in self.return_lines if r != self.line]
        return f"{self.line} ↩ {'/'.join(back)}" if back else self.line


def line_of(row: PeakRow) -> str:
    return row.line or row.detected_line or UNDECLARED


def _merged(windows: Iterable[MergedHours | None]) -> tuple[Sums, float | None, float | None] | None:
    """The windows merged: their sums added, the min of mins and max of maxes (None for none)."""
    members = [m for m in windows if m is not None]
    if not members:
        return None
    lows = [m.lo for m in members if m.lo is not None]
    highs = [m.hi for m in members if m.hi is not None]
    return Sums.total([m.sums for m in members]), min(lows) if lows else None, max(highs) if highs else None


def _figures(merged: Sequence[tuple[Sums, float | None, float | None] | None]) -> list[dict[str, Any]]:
    """Rollup.figures of each merge (every group's quantiles in one step); {} for none."""
    have = [m for m in merged if m is not None]
    got = iter(figures([m[0] for m in have], [m[1] for m in have], [m[2] for m in have]))
    return [next(got) if m is not None else {} for m in merged]


def compare_lines(rows: Sequence[PeakRow]) -> list[LineFigures]:
    """One entry per region × datacenter × line, ordered by region, datacenter, peak P95."""
    groups: dict[tuple[str, str, str], list[PeakRow]] = {}
    for row in rows:
        groups.setdefault((row.region or "", row.datacenter or "", line_of(row)), []).append(row)
    merged = [_merged(r.peak.merged for r in members) for members in groups.values()]
    merged += [_merged(r.offpeak.merged for r in members) for members in groups.values()]
    done = _figures(merged)
    out = []
    for k, ((region, dc, line), members) in enumerate(groups.items()):
        pf, of = done[k], done[len(groups) + k]
        out.append(LineFigures(
            region=region or None, datacenter=dc or None, line=line,
            targets=tuple(sorted({r.target for r in members})),
            agents=tuple(sorted({r.agent for r in members})),
            peak_p50_ms=pf.get("rtt_p50_ms"), peak_p95_ms=pf.get("rtt_p95_ms"),
            peak_loss_pct=pf.get("loss_pct"),
            offpeak_p95_ms=of.get("rtt_p95_ms"), offpeak_loss_pct=of.get("loss_pct"),
            return_lines=tuple(sorted({r.return_line for r in members if r.return_line is not None}))))
    inf = float("inf")
    out.sort(key=lambda g: (g.region or "", g.datacenter or "",
                            g.peak_p95_ms if g.peak_p95_ms is not None else inf, g.line))
    return out
