"""The report as one self-contained HTML file: inline CSS and SVG, no scripts, no external URLs."""

from __future__ import annotations

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


def _e(text: str) -> str:
    return escape(text, quote=True)


def _table(report: PeakReport) -> str:
    shown = columns(report.rows)
    head = "".join(f"<th>{_e(c.head)}</th>" for c in shown)
    body = []
    for row in report.rows:
        cells = "".join(f'<td class="num">{_e(c.cell(row))}</td>' if c.numeric
                        else f"<td>{_e(c.cell(row))}</td>" for c in shown)
        cls = ' class="mismatch"' if row.line_mismatch else ""
        body.append(f"<tr{cls}>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def html(report: PeakReport) -> str:
    parts = [f"<h1>{_e(title(report))}</h1>",
             f'<p class="meta">generated {_e(iso(report.generated_at))} · windows are local hours of each '
             f"agent's time zone, half-open · ranking: {_e(RULE)}</p>"]
    if report.note:
        parts.append(f'<p class="note">{_e(report.note)}</p>')
    parts += [f'<p class="note">warning: {_e(w)}</p>' for w in report.warnings]
    if not report.rows:
        parts.append(f"<p>{_e(empty_message(report))}</p>")
    else:
        profiles = "".join(svg.profile_chart(r, report.window, report.offpeak) for r in report.rows)
        parts += ["<h2>Summary</h2>", f'<div class="scroll">{_table(report)}</div>',
                  "<h2>24-hour profiles</h2>", f'<div class="charts">{profiles}</div>',
                  "<h2>Loss by hour</h2>", svg.loss_heatmap(report.rows, report.window)]
        if any(r.slo is not None and r.slo.hours for r in report.rows):
            hours = "".join(svg.attainment_hours(r, report.window) for r in report.rows if r.slo is not None)
            parts += ["<h2>SLO attainment by hour</h2>", f'<div class="charts">{hours}</div>',
                      "<h2>End-to-end time to first token at the peak</h2>"]
            for region in dict.fromkeys(r.region for r in report.rows):
                parts.append(svg.e2e_curves([r for r in report.rows if r.region == region]))
        if any(r.peak.figure("fwd_loss_pct") is not None for r in report.rows):
            parts += ["<h2>Both directions</h2>", svg.direction_bars(report.rows)]
        parts.append("<h2>Lines</h2>")
        lines = compare_lines(report.rows)
        for region in dict.fromkeys(g.region for g in lines):
            parts.append(svg.line_bars([g for g in lines if g.region == region]))
    page_title = _e(f"netprobe peak report {iso(report.generated_at)}")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{page_title}</title><style>{_CSS}</style></head><body>\n"
            + "\n".join(parts) + "\n</body></html>\n")
