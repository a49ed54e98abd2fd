"""The report as a rich table for people."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .columns import COLUMNS, empty_message, title
from .peak import PeakReport


def table(report: PeakReport) -> Table:
    columns = [c for c in COLUMNS if c.terminal]
    t = Table(title=escape(title(report)), title_justify="left", box=box.SIMPLE_HEAD, collapse_padding=True,
              caption="≠: detected line differs from the declared one; figures of the peak window unless "
              "marked off", caption_justify="left")
    for col in columns:
        t.add_column(col.head, justify="right" if col.numeric else "left", no_wrap=True)
    region: str | None = None
    for i, row in enumerate(report.rows):
        if i and row.region != region:
            t.add_section()           # a rule between regions: ranks restart there
        region = row.region
        style = "yellow" if row.line_mismatch else None
        t.add_row(*(escape(col.cell(row)) for col in columns), style=style)
    return t


def print_table(report: PeakReport, console: Console) -> None:
    if report.note:
        console.print(report.note, highlight=False, markup=False)
    if not report.rows:
        console.print(empty_message(report), highlight=False, markup=False)
        return
    console.print(table(report))
    for warning in report.warnings:
        console.print(f"warning: {warning}", highlight=False, markup=False)
