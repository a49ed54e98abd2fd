"""The target page's smoke graph, drawn as SmokePing draws it, as inline SVG: per time bucket the
rounds' spread as graded "smoke" between quantiles of the bucket's merged sketch (P5–P95 band, then
P10–P90, P25–P75, P40–P60 darker), the median on top as a step line coloured by the bucket's loss,
gaps where a bucket has no RTT sample, a red mark at the top where everything sent was lost.

Fills are opaque and the median is drawn 2 px wide, so a screenshot shows each colour exactly."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from html import escape

import numpy as np
import numpy.typing as npt

from netprobe.report.svg import AXIS, GRID, PEAK_SHADE, nice_max, rect, svg_line, svg_text
from netprobe.report.svg import num as _n
from netprobe.report.windows import DEFAULT_WINDOW
from netprobe.store.hour_arrays import Window
from netprobe.store.prefix import COUNTERS

from .spans import Span

F64 = npt.NDArray[np.float64]
QS = (0.05, 0.10, 0.25, 0.40, 0.50, 0.60, 0.75, 0.90, 0.95)
MEDIAN = QS.index(0.50)
BAND = "#d4e1ee"                                   # P5–P95
SMOKE = ("#b4c0cc", "#8e9aa7", "#67737f")          # P10–P90, P25–P75, P40–P60
LAYERS = ((0.05, 0.95, BAND), (0.10, 0.90, SMOKE[0]), (0.25, 0.75, SMOKE[1]), (0.40, 0.60, SMOKE[2]))
# SmokePing's loss colours (green, then blues and purples to red), at steps that tell route-quality
# losses apart (SmokePing's own are 1, 2, 3, 4, 10, 19 of 20 pings): the upper bound of each, in %
LOSS_STEPS: tuple[tuple[float, str, str], ...] = (
    (0.0, "#26ff00", "0"),
    (0.5, "#00b8ff", "≤ 0.5"),
    (1.0, "#0059ff", "≤ 1"),
    (2.0, "#5e00ff", "≤ 2"),
    (5.0, "#7e00ff", "≤ 5"),
    (20.0, "#dd00ff", "≤ 20"),
    (math.inf, "#ff0000", "> 20"),
)
WIDTH, HEIGHT = 900, 360
BOX = (58.0, 16.0, 30.0, 92.0)       # plot's left, right, top, bottom margins
CRISP = ' shape-rendering="crispEdges"'
_I_SENT, _I_RECEIVED, _I_ROUNDS = (COUNTERS.index(k) for k in ("sent", "received", "rounds"))


def loss_colour(loss: float) -> str:
    """The colour of a bucket with `loss` % lost (NaN: nothing sent, drawn as no loss)."""
    return next((c for bound, c, _ in LOSS_STEPS if loss <= bound), LOSS_STEPS[0][1])


@dataclass(frozen=True, slots=True)
class Buckets:
    """Per bucket of a span: the quantiles QS of its merged sketch ([n, len(QS)], NaN without RTT
    samples), its loss % (NaN where nothing was sent) and rounds."""

    q: F64
    loss: F64
    rounds: npt.NDArray[np.int64]


def buckets_of(window: Window) -> Buckets:
    sent, received = window.c[:, _I_SENT], window.c[:, _I_RECEIVED]
    with np.errstate(invalid="ignore", divide="ignore"):
        loss = np.where(sent > 0, np.maximum(100.0 * (sent - received) / sent, 0.0), np.nan)
    return Buckets(window.quantiles(QS), loss, window.c[:, _I_ROUNDS].astype(np.int64))


def _runs(has: npt.NDArray[np.bool_]) -> list[tuple[int, int]]:
    """[first, last] of each run of consecutive True."""
    idx = np.flatnonzero(has)
    if not len(idx):
        return []
    breaks = np.flatnonzero(np.diff(idx) != 1)
    starts = np.r_[idx[0], idx[breaks + 1]]
    ends = np.r_[idx[breaks], idx[-1]]
    return list(zip(starts.tolist(), ends.tolist(), strict=True))


def _ms(v: float) -> str:
    return f"{v:.1f}" if v < 100 else f"{v:.0f}"


def chart(b: Buckets, span: Span, title: str, probe: str) -> str:
    """The smoke graph of `b` over `span` (one bucket per span bucket), times on the agent's clock."""
    left, right, top, bottom = BOX
    pw, ph = WIDTH - left - right, HEIGHT - top - bottom
    edges = span.epochs()
    t0, t1 = float(edges[0]), float(edges[-1])
    xs = left + (edges - t0) / (t1 - t0) * pw
    has = ~np.isnan(b.q[:, MEDIAN])
    highs = b.q[has, QS.index(0.95)]
    y_top = nice_max(float(highs.max()) * 1.05) if len(highs) else 1.0

    def y(v: float) -> float:
        return top + ph - v / y_top * ph

    def x_at(at: datetime) -> float:
        return left + (at.timestamp() - t0) / (t1 - t0) * pw

    body = [rect(0, 0, WIDTH, HEIGHT, "#ffffff"), svg_text(left, 18, title, size=13, fill="#222222",
                                                           weight="bold"),
            svg_text(WIDTH - right, 18, f"{probe} RTT, ms · {span.bucket_hours} h buckets", anchor="end")]
    shaded = span.bucket_hours == 1
    if shaded:
        body += [rect(x_at(a), top, x_at(z) - x_at(a), ph, PEAK_SHADE)
                 for a, z in span.stretches(DEFAULT_WINDOW)]
    for i in range(5):
        v = y_top * i / 4
        body.append(svg_line(left, left + pw, y(v), y(v), GRID, CRISP))
        body.append(svg_text(left - 6, y(v) + 4, f"{v:g}", anchor="end", size=10))
    # each coordinate formatted once (a 90-day chart has 360 buckets × 9 quantiles)
    sx = [f"{v:.1f}" for v in xs.tolist()]
    sy = [[f"{v:.1f}" for v in col] for col in (top + ph - b.q / y_top * ph).T.tolist()]
    for lo_q, hi_q, colour in LAYERS:
        lo_y, hi_y = sy[QS.index(lo_q)], sy[QS.index(hi_q)]
        for first, last in _runs(has):
            upper = [f"{sx[i]},{hi_y[i]} {sx[i + 1]},{hi_y[i]}" for i in range(first, last + 1)]
            lower = [f"{sx[i + 1]},{lo_y[i]} {sx[i]},{lo_y[i]}" for i in range(last, first - 1, -1)]
            body.append(f'<polygon class="smoke" data-q="{lo_q:g}-{hi_q:g}" '
                        f'points="{" ".join(upper + lower)}" fill="{colour}" stroke="none"/>')
    mid = sy[MEDIAN]
    for i in np.flatnonzero(has).tolist():
        join = f"{mid[i - 1]}V{mid[i]}" if i > 0 and has[i - 1] else mid[i]
        body.append(f'<path class="median" d="M{sx[i]},{join}H{sx[i + 1]}" fill="none" '
                    f'stroke="{loss_colour(b.loss[i])}" stroke-width="2"/>')
    lost = ~has & (b.loss >= 100.0)
    for i in np.flatnonzero(lost).tolist():
        body.append(f'<rect class="all-lost" x="{_n(xs[i])}" y="{_n(top)}" width="{_n(xs[i + 1] - xs[i])}" '
                    f'height="5" fill="{loss_colour(100.0)}"/>')
    body.append(svg_line(left, left + pw, top + ph, top + ph, AXIS, CRISP))
    for at, label in span.ticks():
        xt = x_at(at)
        body.append(svg_line(xt, xt, top + ph, top + ph + 4, AXIS, CRISP))
        body.append(svg_text(xt, top + ph + 16, label, anchor="middle", size=10))
    body += _tips(b, span, xs, top, ph)
    if not len(highs):
        body.append(svg_text(left + pw / 2, top + ph / 2, "no RTT measurements in this span",
                             anchor="middle"))
    body += _legend(top + ph + 34, left, shaded, span)
    return (f'<svg class="smoke-graph" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" '
            f'role="img" aria-label="{escape(title)}" data-y-top="{y_top:g}" data-t0="{t0:.0f}" '
            f'data-t1="{t1:.0f}" '
            f'data-plot="{_n(left)} {_n(top)} {_n(pw)} {_n(ph)}">' + "".join(body) + "</svg>")


def _tips(b: Buckets, span: Span, xs: F64, top: float, ph: float) -> list[str]:
    """A hover title over each bucket with data (transparent: the figures without JavaScript)."""
    out = []
    for i in np.flatnonzero(~np.isnan(b.q[:, MEDIAN]) | ~np.isnan(b.loss)).tolist():
        start = span.edges[i].astimezone(span.zone)
        loss = "—" if np.isnan(b.loss[i]) else f"{b.loss[i]:.2f} %"
        q = b.q[i]
        rtt = ("no RTT sample" if np.isnan(q[MEDIAN]) else
               f"median {_ms(q[MEDIAN])} ms, P5–P95 {_ms(q[0])}–{_ms(q[-1])} ms")
        tip = f"{start:%Y-%m-%d %H:%M} +{span.bucket_hours} h: {rtt}, loss {loss}, {b.rounds[i]} rounds"
        out.append(f'<rect x="{_n(xs[i])}" y="{_n(top)}" width="{_n(xs[i + 1] - xs[i])}" height="{_n(ph)}" '
                   f'fill="#ffffff" fill-opacity="0"><title>{escape(tip)}</title></rect>')
    return out


def _legend(y0: float, x0: float, shaded: bool, span: Span) -> list[str]:
    out = [svg_text(x0, y0 + 10, f"times: {span.zone.key}", size=10)]
    x = x0 + 12 + 6 * len(f"times: {span.zone.key}")
    out.append(svg_text(x, y0 + 10, "median, loss %:", size=10))
    x += 90
    for _, colour, name in LOSS_STEPS:
        out.append(rect(x, y0 + 3, 16, 4, colour))
        out.append(svg_text(x + 20, y0 + 10, name, size=10))
        x += 28 + 6 * len(name)
    y1 = y0 + 22
    x = x0
    parts = [(BAND, "P5–P95"), (SMOKE[0], "P10–P90"), (SMOKE[1], "P25–P75"), (SMOKE[2], "P40–P60"),
             (loss_colour(100.0), "all lost (top mark)")]
    if shaded:
        parts.append((PEAK_SHADE, f"evening peak {DEFAULT_WINDOW.clock()}"))
    for colour, name in parts:
        out.append(rect(x, y1, 14, 12, colour))
        out.append(svg_text(x + 18, y1 + 10, name, size=10))
        x += 30 + 6 * len(name)
    return out


__all__ = ["BAND", "LOSS_STEPS", "QS", "SMOKE", "Buckets", "buckets_of", "chart", "loss_colour"]
