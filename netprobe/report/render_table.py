"""The report as a table for people (laid out by netprobe.report.text_table)."""

from __future__ import annotations

from rich import box
from rich.console import Console

from netprobe.report.text_table import TextTable

from .columns import columns as report_columns
from .columns import empty_message, title
from .peak import PeakReport

CAPTION = "≠: detected line differs from the declared one; figures of the peak window unless marked off"


def table(report: PeakReport) -> TextTable:
    columns = [c for c in report_columns(report.rows) if c.terminal]
    t = TextTable(title=title(report), caption=CAPTION, box=box.SIMPLE_HEAD, collapse_padding=True)
    for col in columns:
        t.add_column(col.head, justify="right" if col.numeric else "left")
    region: str | None = None
    for i, row in enumerate(report.rows):
        if i and row.region != region:
            t.add_section()           # a rule between regions: ranks restart there
        region = row.region
        t.add_row(*(col.cell(row) for col in columns), style="yellow" if row.line_mismatch else None)
    return t


def print_table(report: PeakReport, console: Console) -> None:
    if report.note:
        console.print(report.note, highlight=False, markup=False)
    if not report.rows:
        console.print(empty_message(report), highlight=False, markup=False)
        return
    table(report).print(console)
    for warning in report.warnings:
        console.print(f"warning: {warning}", highlight=False, markup=False)
