"""The report as a table for people (laid out by netprobe.textout)."""

from __future__ import annotations

from netprobe.textout import SIMPLE_HEAD, Out, TextTable

from .columns import columns as report_columns
from .columns import empty_message, title
from .peak import PeakReport

CAPTION = "≠: detected line differs from the declared one; figures of the peak window unless marked off"


def table(report: PeakReport) -> TextTable:
    columns = [c for c in report_columns(report.rows) if c.terminal]
    t = TextTable(title=title(report), caption=CAPTION, box=SIMPLE_HEAD, collapse_padding=True)
    for col in columns:
        t.add_column(col.head, justify="right" if col.numeric else "left")
    region: str | None = None
    for i, row in enumerate(report.rows):
        if i and row.region != region:
            t.add_section()           # a rule between regions: ranks restart there
        region = row.region
        t.add_row(*(col.cell(row) for col in columns), style="yellow" if row.line_mismatch else None)
    return t


def print_table(report: PeakReport, console: Out) -> None:
    if report.note:
        console.print(report.note)
    if not report.rows:
        console.print(empty_message(report))
        return
    console.table(table(report))
    for warning in report.warnings:
        console.print(f"warning: {warning}")
