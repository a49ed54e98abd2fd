"""The report as one self-contained HTML file: inline CSS and SVG, no scripts, no external URLs."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from html import escape

from netprobe.times import iso

from . import svg
from .columns import columns, empty_message, title
from .line_comparison import compare_lines
from .peak import PeakReport
from .ranking import RULE

_CSS = """
body { font-family: system-ui, sans-serif; margin: 24px; color: #222; background: #fff; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }
table { border-collapse: collapse; font-size: 12px; }
th, td { border: 1px solid #ddd; padding: 3px 6px; white-space: nowrap; }
th { background: #f3f3f3; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.mismatch td { background: #fff6d5; }
.scroll { overflow-x: auto; }
.charts { display: flex; flex-wrap: wrap; gap: 12px; }
.meta, .note { color: #555; font-size: 12px; }
"""


def _table(report: PeakReport) -> str:
    shown = columns(report.rows)
    head = "".join(f"<th>{escape(c.head)}</th>" for c in shown)
    body = []
    for row in report.rows:
        # a numeric cell is digits, signs, ".", "/", "×" and "—" (columns.py): nothing to escape
        cells = "".join(f'<td class="num">{c.cell(row)}</td>' if c.numeric
                        else f"<td>{escape(c.cell(row))}</td>" for c in shown)
        cls = ' class="mismatch"' if row.line_mismatch else ""
        body.append(f"<tr{cls}>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def html(report: PeakReport) -> str:
    return "".join(html_chunks(report))


def html_chunks(report: PeakReport) -> Iterator[str]:
    """The page in pieces, so a fleet's page (thousands of charts, 15 MB) is written as it is drawn
    instead of held whole (and its parts besides) in memory."""
    yield _head(report)
    yield from _joined(_parts(report))
    yield _TAIL


def _head(report: PeakReport) -> str:
    page_title = escape(f"netprobe peak report {iso(report.generated_at)}")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{page_title}</title><style>{_CSS}</style></head><body>\n")


_TAIL = "\n</body></html>\n"


def _joined(parts: Iterator[str | Iterator[str]]) -> Iterator[str]:
    """The parts' text, "\n" between them."""
    for k, part in enumerate(parts):
        if k:
            yield "\n"
        if isinstance(part, str):
            yield part
        else:
            yield from part


def _charts(drawn: Iterable[str]) -> Iterator[str]:
    yield '<div class="charts">'
    yield from drawn
    yield "</div>"


def _parts(report: PeakReport) -> Iterator[str | Iterator[str]]:
    """The page's parts in order (a lazy part is drawn when it is written): the title, the summary,
    the profiles, loss by hour, SLO attainment, both directions, the lines."""
    yield f"<h1>{escape(title(report))}</h1>"
    yield (f'<p class="meta">generated {escape(iso(report.generated_at))} · windows are local hours of each '
           f"agent's time zone, half-open · ranking: {escape(RULE)}</p>")
    if report.note:
        yield f'<p class="note">{escape(report.note)}</p>'
    yield from (f'<p class="note">warning: {escape(w)}</p>' for w in report.warnings)
    rows = report.rows
    if not rows:
        yield f"<p>{escape(empty_message(report))}</p>"
        return
    yield "<h2>Summary</h2>"
    yield f'<div class="scroll">{_table(report)}</div>'
    yield "<h2>24-hour profiles</h2>"
    yield _charts(svg.profile_chart(r, report.window, report.offpeak) for r in rows)
    yield "<h2>Loss by hour</h2>"
    yield svg.loss_heatmap(rows, report.window)
    if any(r.slo is not None and r.slo.hours for r in rows):
        yield "<h2>SLO attainment by hour</h2>"
        yield _charts(svg.attainment_hours(r, report.window) for r in rows if r.slo is not None)
        yield "<h2>End-to-end time to first token at the peak</h2>"
        for region in dict.fromkeys(r.region for r in rows):
            yield svg.e2e_curves([r for r in rows if r.region == region])
    if any(r.peak.figure("fwd_loss_pct") is not None for r in rows):
        yield "<h2>Both directions</h2>"
        yield svg.direction_bars(rows)
    yield "<h2>Lines</h2>"
    lines = compare_lines(rows)
    for region in dict.fromkeys(g.region for g in lines):
        yield svg.line_bars([g for g in lines if g.region == region])
