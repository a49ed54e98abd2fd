"""The report's columns as text, shared by the terminal table, Markdown and HTML (rounded for people;
JSON keeps full precision)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from netprobe.probes import REGISTRY
from netprobe.probes.base import ReportColumn

from .peak import PeakReport
from .rows import PeakRow

NONE = "—"


def ms(v: float | None) -> str:
    return NONE if v is None else f"{v:.1f}"


def pct(v: float | None) -> str:
    return NONE if v is None else f"{v:.2f}"


share = ms          # a share of requests, %: one decimal, as ms


def signed(v: float | None, unit: str = "") -> str:
    return NONE if v is None else f"{v:+.1f}{unit}"


def ratio(v: float | None) -> str:
    return NONE if v is None else f"×{v:.2f}"


def worst(row: PeakRow) -> str:
    w = row.worst_hour
    return NONE if w is None else f"{w.hour:%m-%d %H:%M} {w.loss_pct:.2f}%"


def detected(row: PeakRow) -> str:
    """The detected line; `≠` marks one that differs from the declared line."""
    if row.detected_line is None:
        return NONE
    return f"{row.detected_line} ≠" if row.line_mismatch else row.detected_line


@dataclass(frozen=True, slots=True)
class Column:
    head: str
    cell: Callable[[PeakRow], str]
    numeric: bool = True
    terminal: bool = True       # False: left out of the terminal table to keep it on one screen


COLUMNS: tuple[Column, ...] = (
    Column("region", lambda r: r.region or NONE, numeric=False),
    Column("rank", lambda r: NONE if r.rank is None else str(r.rank)),
    Column("agent", lambda r: r.agent, numeric=False),
    Column("target", lambda r: r.target, numeric=False),
    Column("dc", lambda r: r.datacenter or NONE, numeric=False),
    Column("line", lambda r: r.line or NONE, numeric=False),
    Column("detected", detected, numeric=False),
    Column("peak p50", lambda r: ms(r.peak.rtt_p50_ms)),
    Column("peak p95", lambda r: ms(r.peak.rtt_p95_ms)),
    Column("peak p99", lambda r: ms(r.peak.rtt_p99_ms)),
    Column("jitter", lambda r: ms(r.peak.jitter_ms)),
    Column("loss%", lambda r: pct(r.peak.loss_pct)),
    Column("SLO%", lambda r: share(r.slo.attainment_pct if r.slo is not None else None)),
    Column("off p50", lambda r: ms(r.offpeak.rtt_p50_ms), terminal=False),
    Column("off p95", lambda r: ms(r.offpeak.rtt_p95_ms)),
    Column("off loss%", lambda r: pct(r.offpeak.loss_pct)),
    Column("Δ p95", lambda r: signed(r.degradation.rtt_p95_delta_ms)),
    Column("p95 ratio", lambda r: ratio(r.degradation.rtt_p95_ratio), terminal=False),
    Column("Δ loss%", lambda r: signed(r.degradation.loss_delta_pct)),
    Column("worst hour (local)", worst, numeric=False),
)
_ROUNDS = Column("rounds pk/off", lambda r: f"{r.peak.rounds}/{r.offpeak.rounds}")
UNITS: dict[str, Callable[[float | None], str]] = {"ms": ms, "pct": pct, "rate": pct}


def _probe_column(c: ReportColumn) -> Column:
    fmt = UNITS[c.unit]
    return Column(c.head, lambda r: fmt(r.peak.figure(c.figure)), terminal=c.terminal)


def back(row: PeakRow) -> str:
    """The line the way back was traced on (rmtr); `≠` marks one that is not the declared line."""
    if row.return_line is None:
        return NONE
    return f"{row.return_line} ≠" if row.line and row.return_line != row.line else row.return_line


_BACK = Column("back", back, numeric=False)


def columns(rows: Sequence[PeakRow]) -> list[Column]:
    """The common columns (with `back` after `detected` once some row's way back was traced), then each
    probe's (its spec's ReportRole.columns, registry order; one `when_measured` only if some row has
    it), then the round counts."""
    common = list(COLUMNS)
    if any(r.return_line is not None for r in rows):
        common.insert(next(i for i, c in enumerate(common) if c.head == "detected") + 1, _BACK)
    probe = [c for spec in REGISTRY.values() for c in spec.report.columns
             if not c.when_measured or any(r.peak.figure(c.figure) is not None for r in rows)]
    return [*common, *map(_probe_column, probe), _ROUNDS]


def title(report: PeakReport) -> str:
    scope = "".join(f", {k} {v}" for k, v in (("agent", report.agent), ("region", report.region)) if v)
    return (f"Evening peak {report.window.clock()} vs off-peak {report.offpeak.clock()}, each agent's local "
            f"time, last {report.days} day{'s' * (report.days != 1)}{scope} — times in ms, rank by peak "
            f"P95 + 100 ms per 1 % loss" + (f" — SLO%: share of requests with the first token within "
                                            f"{report.slo.model.ttft_ms:g} ms at the peak"
                                            if report.slo is not None else ""))


def empty_message(report: PeakReport) -> str:
    scope = "".join(f" {k} {v}" for k, v in (("for agent", report.agent), ("in region", report.region)) if v)
    return (f"no hourly rollups{scope} in the last {report.days} local day{'s' * (report.days != 1)}: "
            "nothing to report")
