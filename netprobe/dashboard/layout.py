"""The page shell every view shares: inline CSS, the navigation, and safe links."""

from __future__ import annotations

from collections.abc import Iterable
from html import escape
from urllib.parse import quote

DEFAULT_DAYS = 7
MIN_DAYS, MAX_DAYS = 1, 90

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#1b1f24;background:#fff}
header{background:#1f3347;color:#fff;padding:8px 16px;display:flex;gap:16px;align-items:baseline}
header a{color:#cfe3ff;text-decoration:none}header a.here{color:#fff;font-weight:600}
header .brand{font-weight:700;color:#fff}
main{padding:12px 16px}h1{font-size:18px;margin:4px 0 8px}h2{font-size:16px;margin:16px 0 6px}
table{border-collapse:collapse;margin:4px 0 12px}th,td{padding:3px 8px;border-bottom:1px solid #e3e6ea;
text-align:left;white-space:nowrap}th{background:#f3f5f7;font-weight:600}td.n{text-align:right;
font-variant-numeric:tabular-nums}tr:hover td{background:#f7fafd}
.note{color:#57606a;font-size:13px}.bad{color:#b3261e;font-weight:600}.ok{color:#1a7f37}
.warn{color:#9a6700}.spans a{margin-right:6px}.spans a.here{font-weight:700;text-decoration:none;
color:#1b1f24}a{color:#0b5cad}
"""


def e(value: object) -> str:
    return escape(str(value), quote=True)


def href(base: str, *parts: str, days: int | None = None) -> str:
    """A link under the dashboard's prefix, each path part quoted whole (ids may hold no "/" anyway)."""
    path = base + "/".join(quote(p, safe="") for p in parts)
    return f"{path}?days={days}" if days is not None else path


def target_href(base: str, agent_id: str, target_id: str, days: int = DEFAULT_DAYS) -> str:
    return href(base, "target", agent_id, target_id, days=days)


def page(title: str, body: str, base: str, here: str) -> str:
    """A whole HTML document; `here`: which navigation entry is current ("overview", "agents", "")."""
    nav = "".join(f'<a href="{e(base + path)}"{" class=here" if name == here else ""}>{label}</a>'
                  for name, path, label in (("overview", "", "Overview"), ("agents", "agents", "Agents")))
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<title>{e(title)} — netprobe</title><style>{_CSS}</style></head><body>"
            f'<header><span class="brand">netprobe</span>{nav}</header><main>{body}</main></body></html>')


def table(heads: Iterable[tuple[str, bool]], rows: Iterable[Iterable[str]]) -> str:
    """`heads`: (label, numeric); `rows`: cells already HTML (escaped by the caller)."""
    cols = list(heads)
    head = "".join(f"<th>{e(h)}</th>" for h, _ in cols)
    body = "".join("<tr>" + "".join(f'<td class="n">{c}</td>' if numeric else f"<td>{c}</td>"
                                    for c, (_, numeric) in zip(row, cols, strict=True)) + "</tr>"
                   for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def loss_colour(loss_pct: float | None) -> str:
    """SmokePing's idea, in three steps: green below 0.1 % loss, amber below 1 %, red from 1 %."""
    if loss_pct is None:
        return "#8c959f"
    return "#2da44e" if loss_pct < 0.1 else "#d4a72c" if loss_pct < 1.0 else "#cf222e"


def bar(value: float | None, top: float, loss_pct: float | None, width: int = 160) -> str:
    """An inline SVG bar: `value` on a 0…`top` scale, coloured by loss."""
    if value is None or top <= 0:
        return ""
    w = max(1, round(width * min(value, top) / top))
    return (f'<svg width="{width}" height="12" role="img" aria-label="{value:.1f}">'
            f'<rect width="{w}" height="12" fill="{loss_colour(loss_pct)}"/></svg>')
