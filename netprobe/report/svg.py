"""Inline SVG charts, drawn here (no plotting library, no external assets): the 24-hour profile with
its P5–P95 "smoke", the hour × target loss heatmap, and the line comparison bars.

Fills are opaque so a screenshot shows each chart's colours exactly (tests look for them)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from functools import lru_cache
from html import escape

from .line_comparison import LineFigures
from .rows import HourProfile, PeakRow
from .windows import HourWindow

BAND = "#9ecae1"          # P5–P95 smoke
MEDIAN = "#08519c"
PEAK_SHADE = "#fdd9b5"    # peak window behind the curves
OFFPEAK_SHADE = "#d9f0d3"
AXIS = "#555555"
GRID = "#e3e3e3"
NO_DATA = "#e6e6e6"
OFFPEAK_BAR = "#b0b0b0"
FONT = 'font-family="system-ui,sans-serif"'

# loss % → colour, upper bounds (the last bin is open): 0 is its own green so "measured, no loss"
# differs from "no data"
LOSS_BINS: tuple[tuple[float, str, str], ...] = (
    (0.0, "#1a9850", "0"),
    (0.1, "#91cf60", "< 0.1"),
    (0.5, "#fee08b", "0.1–0.5"),
    (1.0, "#fc8d59", "0.5–1"),
    (2.0, "#e34a33", "1–2"),
    (math.inf, "#b30000", "≥ 2"),
)
LINE_COLOURS = {"cn2-gia": "#1b9e77", "cn2-gt": "#66a61e", "163": "#d95f02", "bgp": "#7570b3",
                "cmi": "#e7298a", "cmin2": "#e6ab02", "cu-9929": "#a6761d", "cu-4837": "#8c6bb1",
                "ctgnet": "#1f78b4", "other": "#666666"}
_SPARE = ("#4d9221", "#c51b7d", "#2166ac", "#b35806", "#542788")


def loss_colour(loss: float | None) -> str:
    if loss is None:
        return NO_DATA
    return next((colour for bound, colour, _ in LOSS_BINS if loss <= bound), LOSS_BINS[-1][1])   # NaN: last


def line_colour(line: str) -> str:
    if line in LINE_COLOURS:
        return LINE_COLOURS[line]
    return _SPARE[sum(map(ord, line)) % len(_SPARE)]   # stable across runs, unlike hash()


def num(v: float) -> str:
    return f"{v:.1f}"


def svg_text(x: float, y: float, text: str, *, size: int = 11, anchor: str = "start", fill: str = AXIS,
             weight: str = "normal") -> str:
    return (f'<text x="{num(x)}" y="{num(y)}" font-size="{size}" text-anchor="{anchor}" fill="{fill}" '
            f'font-weight="{weight}" {FONT}>{escape(text)}</text>')


def svg_line(x1: float, x2: float, y1: float, y2: float, stroke: str, extra: str = "") -> str:
    """A line 1 px wide; `extra`: more attributes, after a space."""
    return (f'<line x1="{num(x1)}" x2="{num(x2)}" y1="{num(y1)}" y2="{num(y2)}" stroke="{stroke}" '
            f'stroke-width="1"{extra}/>')


def rect(x: float, y: float, w: float, h: float, fill: str, tip: str | None = None) -> str:
    head = (f'<rect x="{num(x)}" y="{num(y)}" width="{num(max(w, 0.0))}" height="{num(max(h, 0.0))}" '
            f'fill="{fill}"')
    return f"{head}/>" if tip is None else f"{head}><title>{escape(tip)}</title></rect>"


def _svg(width: int, height: int, label: str, body: Sequence[str]) -> str:
    return (f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
            f'aria-label="{escape(label)}">' + "".join(body) + "</svg>")


def nice_max(v: float) -> float:
    """The smallest round number (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8 × 10ⁿ) at or above v: an axis top."""
    if v <= 0:
        return 1.0
    base = 10.0 ** math.floor(math.log10(v))
    return next(m * base for m in (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0) if m * base >= v)


def _runs(profile: Sequence[HourProfile]) -> list[list[tuple[int, float, float, float]]]:
    """Consecutive hours with data, as (hour, P5, P50, P95): the band and the line break where an hour
    has none."""
    runs: list[list[tuple[int, float, float, float]]] = [[]]
    for p in profile:
        if p.rtt_p5_ms is not None and p.rtt_p50_ms is not None and p.rtt_p95_ms is not None:
            runs[-1].append((p.hour, p.rtt_p5_ms, p.rtt_p50_ms, p.rtt_p95_ms))
        elif runs[-1]:
            runs.append([])
    return [run for run in runs if run]


# A fleet's HTML report draws 1,000 profiles and a heatmap of 24,000 cells: what does not depend on the
# row (the shaded windows, the grid for a given axis top, the hour axis and legend, each hour's x) is
# made once per chart size, the same text it would be if made for each chart.
_PROFILE_BOX = (52.0, 14.0, 30.0, 34.0)      # left, right, top, bottom


@lru_cache(maxsize=16)
def _profile_shades(window: HourWindow, offpeak: HourWindow, width: int, height: int) -> str:
    left, right, top, bottom = _PROFILE_BOX
    pw, ph = width - left - right, height - top - bottom
    slot = pw / 24
    return "".join(rect(left + h * slot, top, slot, ph, shade)
                   for w, shade in ((window, PEAK_SHADE), (offpeak, OFFPEAK_SHADE)) for h in w.hours)


@lru_cache(maxsize=256)
def _profile_grid(y_top: float, width: int, height: int) -> str:
    left, right, top, bottom = _PROFILE_BOX
    pw, ph = width - left - right, height - top - bottom
    body = []
    for i in range(5):
        v = y_top * i / 4
        yv = top + ph - v / y_top * ph
        body.append(svg_line(left, left + pw, yv, yv, GRID))
        body.append(svg_text(left - 6, yv + 4, f"{v:g}", anchor="end", size=10))
    return "".join(body)


@lru_cache(maxsize=16)
def _profile_axis(width: int, height: int) -> str:
    left, right, top, bottom = _PROFILE_BOX
    pw, ph = width - left - right, height - top - bottom
    slot = pw / 24
    body = [svg_line(left, left + pw, top + ph, top + ph, AXIS)]
    body += [svg_text(left + (h + 0.5) * slot, top + ph + 14, f"{h:02d}", anchor="middle", size=10)
             for h in range(0, 24, 3)]
    body.append(svg_text(left, height - 4, "local hour · band P5–P95 · line median · orange peak window · "
                         "green off-peak", size=10))
    return "".join(body)


def _points(xys: Iterable[tuple[float, float]]) -> str:
    """An SVG points list: "x,y x,y …"."""
    return " ".join(f"{num(x)},{num(y)}" for x, y in xys)


def profile_chart(row: PeakRow, window: HourWindow, offpeak: HourWindow, width: int = 660,
                  height: int = 250) -> str:
    """Median RTT by local hour with the P5–P95 band, peak and off-peak hours shaded."""
    left, right, top, bottom = _PROFILE_BOX
    pw, ph = width - left - right, height - top - bottom
    slot = pw / 24
    highs = [p.rtt_p95_ms for p in row.profile if p.rtt_p95_ms is not None]
    y_top = nice_max(max(highs) * 1.05) if highs else 1.0

    def x(h: float) -> float:
        return left + (h + 0.5) * slot

    def y(v: float) -> float:
        return top + ph - v / y_top * ph

    line = f" ({row.line})" if row.line else ""
    if row.line_mismatch:
        line = f" ({row.line}, detected {row.detected_line})"
    title = f"{row.agent} → {row.target}{line}"
    body = [rect(0, 0, width, height, "#ffffff"), svg_text(left, 18, title, size=13, fill="#222222",
                                                           weight="bold"),
            svg_text(width - right, 18, f"RTT ms by local hour ({row.timezone}), {row.rtt_probe or 'no RTT'}",
                     anchor="end"),
            _profile_shades(window, offpeak, width, height), _profile_grid(y_top, width, height)]
    for run in _runs(row.profile):
        if len(run) == 1:      # one hour alone: a short bar and a dot
            h, lo, mid, hi = run[0]
            body.append(rect(x(h) - slot / 4, y(hi), slot / 2, y(lo) - y(hi), BAND))
            body.append(f'<circle cx="{num(x(h))}" cy="{num(y(mid))}" r="3" fill="{MEDIAN}"/>')
            continue
        band = _points([(x(h), y(hi)) for h, _, _, hi in run]
                       + [(x(h), y(lo)) for h, lo, _, _ in reversed(run)])
        body.append(f'<polygon points="{band}" fill="{BAND}" stroke="none"/>')
        body.append(f'<polyline points="{_points((x(h), y(mid)) for h, _, mid, _ in run)}" fill="none" '
                    f'stroke="{MEDIAN}" stroke-width="2.5" stroke-linejoin="round"/>')
    if not highs:
        body.append(svg_text(left + pw / 2, top + ph / 2, "no RTT measurements", anchor="middle"))
    body.append(_profile_axis(width, height))
    return _svg(width, height, f"24-hour RTT profile of {title}", body)


def loss_heatmap(rows: Sequence[PeakRow], window: HourWindow, cell: int = 24) -> str:
    """Hour of day (local to each agent) × agent → target, coloured by loss."""
    label_w, top, row_h = 260.0, 46.0, 20.0
    width = int(label_w + 24 * cell + 20)
    height = int(top + row_h * len(rows) + 50)
    body = [rect(0, 0, width, height, "#ffffff"),
            svg_text(0, 14, "Loss % by local hour of day (each agent's time zone), merged over the days",
                     size=13, fill="#222222", weight="bold")]
    for h in range(24):
        if window.contains(h):
            body.append(rect(label_w + h * cell, top - 8, cell, 4, PEAK_SHADE))
        body.append(svg_text(label_w + (h + 0.5) * cell, top - 12, f"{h:02d}", anchor="middle", size=9))
    for i, row in enumerate(rows):
        yy = top + i * row_h
        label = f"{row.agent} → {row.target}"
        body.append(svg_text(label_w - 8, yy + row_h * 0.7, label, anchor="end", size=11))
        for p in row.profile:
            tip = "no data" if p.loss_pct is None else f"{p.loss_pct:.3f} % loss, {p.rounds} rounds"
            body.append(rect(label_w + p.hour * cell + 1, yy + 1, cell - 2, row_h - 2,
                             loss_colour(p.loss_pct), f"{label} {p.hour:02d}:00: {tip}"))
    ly = top + row_h * len(rows) + 18
    lx = label_w
    body.append(svg_text(lx - 8, ly + 11, "loss %", anchor="end", size=10))
    for _, colour, name in (*LOSS_BINS, (0.0, NO_DATA, "no data")):
        body.append(rect(lx, ly, 16, 14, colour))
        body.append(svg_text(lx + 20, ly + 11, name, size=10))
        lx += 26 + 7 * len(name)
    return _svg(width, height, "loss heatmap", body)


def line_bars(lines: Sequence[LineFigures], width: int = 900) -> str:
    """Per datacenter, one bar per line: peak P95 (the line's colour) over off-peak P95 (grey)."""
    label_w, top, bar_h, gap = 190.0, 40.0, 14.0, 10.0
    value_w = 190.0
    pw = width - label_w - value_w
    highs = [v for g in lines for v in (g.peak_p95_ms, g.offpeak_p95_ms) if v is not None]
    x_top = nice_max(max(highs) * 1.02) if highs else 1.0
    dcs = list(dict.fromkeys(g.datacenter for g in lines))
    height = int(top + len(lines) * (2 * bar_h + gap) + len(dcs) * 22 + 30)
    region = next((g.region for g in lines if g.region), None)
    body = [rect(0, 0, width, height, "#ffffff"),
            svg_text(0, 16, f"Lines compared — region {region or '—'}: peak P95 (colour) vs off-peak P95 "
                     "(grey), ms; ↩ the way back where it is another line", size=13, fill="#222222",
                  weight="bold")]
    yy = top
    for dc in dcs:
        body.append(svg_text(0, yy + 12, f"datacenter {dc or '—'}", size=12, fill="#222222", weight="bold"))
        yy += 22
        for g in (g for g in lines if g.datacenter == dc):
            body.append(svg_text(label_w - 8, yy + bar_h, g.label(), anchor="end", size=12))
            if g.peak_p95_ms is not None:
                body.append(rect(label_w, yy, g.peak_p95_ms / x_top * pw, bar_h, line_colour(g.line)))
            if g.offpeak_p95_ms is not None:
                body.append(rect(label_w, yy + bar_h, g.offpeak_p95_ms / x_top * pw, bar_h * 0.7,
                                  OFFPEAK_BAR))
            loss = "—" if g.peak_loss_pct is None else f"{g.peak_loss_pct:.2f} % loss"
            p95 = "—" if g.peak_p95_ms is None else f"{g.peak_p95_ms:.1f}"
            off = "—" if g.offpeak_p95_ms is None else f"{g.offpeak_p95_ms:.1f}"
            body.append(svg_text(label_w + pw + 8, yy + bar_h, f"{p95} / {off} ms · {loss}", size=11))
            yy += 2 * bar_h + gap
    body.append(svg_line(label_w, label_w, top, yy, AXIS))
    body.append(svg_text(label_w, yy + 14, "0", anchor="middle", size=10))
    body.append(svg_text(label_w + pw, yy + 14, f"{x_top:g} ms", anchor="middle", size=10))
    return _svg(width, height, "line comparison", body)


FWD_BAR = "#3182bd"       # the way out
RET_BAR = "#e6550d"       # the way back


def direction_bars(rows: Sequence[PeakRow], width: int = 900) -> str:
    """For each row with owd at peak: its loss out and back (bars, %) and each direction's delay
    variation P95 (text): where the evening peak's loss and jitter happen."""
    shown = [r for r in rows if r.peak.figure("fwd_loss_pct") is not None
             or r.peak.figure("ret_loss_pct") is not None]
    label_w, top, bar_h, gap, value_w = 230.0, 40.0, 12.0, 10.0, 260.0
    pw = width - label_w - value_w
    losses = [v for r in shown for k in ("fwd_loss_pct", "ret_loss_pct")
              if (v := r.peak.figure(k)) is not None]
    x_top = nice_max(max(losses) * 1.05) if losses and max(losses) > 0 else 1.0
    height = int(top + len(shown) * (2 * bar_h + gap) + 30)
    body = [rect(0, 0, width, height, "#ffffff"),
            svg_text(0, 16, "Both directions at peak (owd): loss out (blue) and back (orange), %; delay "
                     "variation P95 out / back, ms", size=13, fill="#222222", weight="bold")]
    yy = top
    for r in shown:
        fwd, ret = r.peak.figure("fwd_loss_pct"), r.peak.figure("ret_loss_pct")
        body.append(svg_text(label_w - 8, yy + bar_h + 2, f"{r.agent} → {r.target}", anchor="end", size=12))
        for i, (v, colour, way) in enumerate(((fwd, FWD_BAR, "out"), (ret, RET_BAR, "back"))):
            if v is not None:
                body.append(rect(label_w, yy + i * bar_h, max(v / x_top * pw, 0.5), bar_h * 0.9, colour,
                                  tip=f"{r.target}: {v:.2f} % lost on the way {way}"))
        fv, rv = r.peak.figure("fwd_delay_var_p95_ms"), r.peak.figure("ret_delay_var_p95_ms")
        text = (f"{'—' if fwd is None else f'{fwd:.2f}'} / {'—' if ret is None else f'{ret:.2f}'} % · "
                f"{'—' if fv is None else f'{fv:.1f}'} / {'—' if rv is None else f'{rv:.1f}'} ms")
        body.append(svg_text(label_w + pw + 8, yy + bar_h + 2, text, size=11))
        yy += 2 * bar_h + gap
    body.append(svg_text(label_w, yy + 14, "0", anchor="middle", size=10))
    body.append(svg_text(label_w + pw, yy + 14, f"{x_top:g} %", anchor="middle", size=10))
    return _svg(width, height, "loss by direction", body)


SLO_MET = "#1a9850"       # an hour at or above the attainment goal
SLO_MISSED = "#e34a33"


_HOURS_BOX = (52.0, 14.0, 30.0, 30.0)        # left, right, top, bottom


@lru_cache(maxsize=16)
def _hours_frame(window: HourWindow, ttft_ms: float | None, width: int, height: int
                 ) -> tuple[str, str, tuple[str, ...], str]:
    """What every attainment chart of a size draws the same: the background, the text and grid after
    the title, each hour's bar head (x, y=), and the hour axis; the same text as drawn per chart."""
    left, right, top, bottom = _HOURS_BOX
    pw, ph = width - left - right, height - top - bottom
    slot = pw / 24
    target = f"first token ≤ {ttft_ms:g} ms" if ttft_ms is not None else "no SLO"
    mid = [svg_text(width - right, 18, f"requests within the SLO, % ({target}), by local hour", anchor="end")]
    mid += [rect(left + h * slot, top, slot, ph, PEAK_SHADE) for h in window.hours]
    for tick in (0, 50, 100):
        yv = top + ph - tick / 100 * ph
        mid.append(svg_line(left, left + pw, yv, yv, GRID))
        mid.append(svg_text(left - 6, yv + 4, f"{tick}", anchor="end", size=10))
    heads = tuple(f'<rect x="{num(left + h * slot + 2)}" y="' for h in range(24))
    axis = "".join(svg_text(left + (h + 0.5) * slot, top + ph + 14, f"{h:02d}", anchor="middle", size=10)
                   for h in range(0, 24, 3))
    return rect(0, 0, width, height, "#ffffff"), "".join(mid), heads, axis


def attainment_hours(row: PeakRow, window: HourWindow, goal: float = 95.0, width: int = 660,
                     height: int = 170) -> str:
    """The share of requests within the SLO by local hour (the evening dip), peak hours shaded; bars
    green at or above `goal` %, red below; the axis starts at 0 so a dip is seen at its true size."""
    slo = row.slo
    left, right, top, bottom = _HOURS_BOX
    pw, ph = width - left - right, height - top - bottom
    slot = pw / 24
    hours = slo.hours if slo is not None else ()
    title = f"{row.agent} → {row.target}" + (f" ({row.line})" if row.line else "")
    ttft = slo.ttft_ms if slo is not None else None
    background, mid, heads, axis = _hours_frame(window, ttft, width, height)
    body = [background, svg_text(left, 18, title, size=13, fill="#222222", weight="bold"), mid]
    # each bar as rect(left + h·slot + 2, top + ph − bar, slot − 4, max(bar, 1), colour, tip) draws it
    size = f'" width="{num(max(slot - 4, 0.0))}" height="'
    base = top + ph
    for h, got in enumerate(hours):
        if got is None:
            continue
        bar = got / 100 * ph
        body.append(f'{heads[h]}{base - bar:.1f}{size}{max(bar, 1.0):.1f}" fill="'
                    f'{SLO_MET if got >= goal else SLO_MISSED}"><title>{h:02d}:00 {got:.1f} %</title></rect>')
    if not any(v is not None for v in hours):
        body.append(svg_text(left + pw / 2, top + ph / 2, "no RTT measurements", anchor="middle"))
    body.append(axis)
    return _svg(width, height, f"SLO attainment by hour of {title}", body)


def e2e_curves(rows: Sequence[PeakRow], width: int = 900, height: int = 300) -> str:
    """Per candidate (one region), the end-to-end time to first token at the peak as a cumulative
    share of requests, with the SLO target marked: where each curve crosses it is its attainment."""
    shown = [r for r in rows if r.slo is not None and r.slo.curve]
    left, right, top, bottom = 52.0, 250.0, 30.0, 34.0
    pw, ph = width - left - right, height - top - bottom
    ttft = shown[0].slo.ttft_ms if shown and shown[0].slo is not None else 1000.0
    x_top = nice_max(max([ttft * 1.1] + [r.slo.curve[-1][0] for r in shown if r.slo is not None]))
    region = next((r.region for r in rows if r.region), None)
    body = [rect(0, 0, width, height, "#ffffff"),
            svg_text(left, 18, f"End-to-end time to first token at the peak — region {region or '—'}: "
                     "share of requests within, %", size=13, fill="#222222", weight="bold")]
    for v in (0, 25, 50, 75, 95, 100):
        yv = top + ph - v / 100 * ph
        body.append(svg_line(left, left + pw, yv, yv, GRID))
        body.append(svg_text(left - 6, yv + 4, f"{v}", anchor="end", size=10))
    xt = left + ttft / x_top * pw
    base = top + ph
    body.append(f'<line x1="{num(xt)}" x2="{num(xt)}" y1="{num(top)}" y2="{num(top + ph)}" '
                f'stroke="#222222" stroke-width="1.5" stroke-dasharray="4 3"/>')
    body.append(svg_text(xt + 4, top + 12, f"SLO {ttft:g} ms", size=10, fill="#222222"))
    for k, r in enumerate(shown):
        assert r.slo is not None
        colour = line_colour(r.line or "other")
        pts = _points((left + x / x_top * pw, base - f * ph) for x, f in r.slo.curve)
        body.append(f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="2"/>')
        got = r.slo.attainment_pct
        body.append(rect(left + pw + 12, top + k * 16, 10, 10, colour))
        body.append(svg_text(left + pw + 26, top + k * 16 + 9, f"{r.agent} → {r.target}: "
                             f"{'—' if got is None else f'{got:.1f}'} %", size=11))
    body.append(svg_text(left, height - 4, f"ms from the request to the first token (0–{x_top:g})", size=10))
    return _svg(width, height, f"end-to-end TTFT, region {region or '—'}", body)
