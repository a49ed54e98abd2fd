"""What every table for people shares (each probe's own table lives with its CLI in netprobe/probes/).
Figures are rounded here, for display only; JSON keeps full precision."""

from __future__ import annotations

from collections.abc import Sequence

from netprobe.probes.results import ProbeResult
from netprobe.stats import RttStats
from netprobe.textout import Out, TextTable, style

STAT_COLUMNS = ("min", "avg", "p50", "p95", "max", "stdev")


def ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def pct(value: float) -> str:
    return f"{value:.1f}"


def stat_cells(stats: RttStats | None) -> list[str]:
    if stats is None:
        return ["—"] * len(STAT_COLUMNS)
    return [ms(getattr(stats, name)) for name in STAT_COLUMNS]


def add_status_row(t: TextTable, r: ProbeResult, *cells: str) -> None:
    """A row of `cells`, then the result's status: ok in green, else its error kind in red."""
    t.add_row(*cells, "ok" if r.status == "ok" else r.error_kind or r.status,
              cell_styles=[None] * len(cells) + ["green" if r.status == "ok" else "red"])


def new_table(title: str, head: Sequence[str]) -> TextTable:
    t = TextTable(title=title)
    for name in head:
        t.add_column(name, justify="left" if name in ("host", "address", "status", "failures") else "right")
    return t


def print_table(table: TextTable, results: Sequence[ProbeResult]) -> None:
    """The table, then one line per failed target with its full error message."""
    out = Out()
    out.table(table)
    for r in results:
        if r.status != "ok" and r.error:
            out.print(style(f"{r.host}:", "red") + f" {r.error}")
