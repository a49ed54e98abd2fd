"""What every table for people shares (each probe's own table lives with its CLI in netprobe/probes/).
Figures are rounded here, for display only; JSON keeps full precision."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from netprobe.probes.results import ProbeResult
from netprobe.stats import RttStats

STAT_COLUMNS = ("min", "avg", "p50", "p95", "max", "stdev")


def console() -> Console:
    """Stdout console; when piped, wide enough that tables are not squeezed into 80 columns."""
    c = Console(emoji=False, highlight=False)
    if not c.is_terminal:
        c = Console(emoji=False, highlight=False, width=max(c.width, 240))
    return c


def ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def pct(value: float) -> str:
    return f"{value:.1f}"


def stat_cells(stats: RttStats | None) -> list[str]:
    if stats is None:
        return ["—"] * len(STAT_COLUMNS)
    return [ms(getattr(stats, name)) for name in STAT_COLUMNS]


def status_cell(r: ProbeResult) -> str:
    if r.status == "ok":
        return "[green]ok[/]"
    return f"[red]{r.error_kind or r.status}[/]"


def new_table(title: str, head: Sequence[str]) -> Table:
    t = Table(title=title, title_justify="left")
    for name in head:
        t.add_column(name, justify="left" if name in ("host", "address", "status", "failures") else "right")
    return t


def print_table(table: Table, results: Sequence[ProbeResult]) -> None:
    """The table, then one line per failed target with its full error message."""
    out = console()
    out.print(table)
    for r in results:
        if r.status != "ok" and r.error:
            out.print(f"[red]{escape(r.host)}:[/] {escape(r.error)}")
