"""SLO attainment per row of the report (DESIGN §10): from each window's merged RTT bins and loss, and the
server's first-token time — given, or measured by openai-mode streams — computed for every series of
an agent at once (netprobe.budget.attainment)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from netprobe.budget.attainment import (
    F64,
    GRID_CELLS,
    PRUNE,
    Outcome,
    Rtts,
    Server,
    SloModel,
    attainments,
    curves,
    drawn_attainments,
    outcomes,
)
from netprobe.stats import LogNormal

if TYPE_CHECKING:
    from netprobe.store.hour_arrays import Window

DEFAULT_SLO_TTFT_MS = 1000.0
ServerSource = Literal["given", "measured", "none"]
# the sse figures a measured server is read from: the mean and mean square of ln(first token ms)
LN_MEAN, LN2_MEAN = "sse_server_first_ln_mean", "sse_server_first_ln2_mean"
SLICE = 2048            # cases copied out of a window at a time


@dataclass(frozen=True, slots=True)
class SloRequest:
    model: SloModel
    server: Server = None            # given; None: measured where openai-mode streams ran, else none
    outcome: bool = False            # the peak's end-to-end quantiles and GPU budget (the budget's)
    hours: bool = False              # attainment per local hour of day
    curve: bool = False              # the peak's end-to-end TTFT distribution (the HTML draws it)


@dataclass(frozen=True, slots=True)
class SloFigures:
    ttft_ms: float
    attainment_pct: float | None                 # peak window
    offpeak_attainment_pct: float | None
    hours: tuple[float | None, ...]              # local hours 0–23 (empty unless asked)
    server: ServerSource
    outcome: Outcome | None = None               # the peak's, when asked
    curve: tuple[tuple[float, float], ...] = ()  # the peak's e2e TTFT CDF: (ms, share), when asked

    def to_dict(self) -> dict[str, Any]:
        o = self.outcome
        return {"slo_ttft_ms": self.ttft_ms, "attainment_pct": self.attainment_pct,
                "offpeak_attainment_pct": self.offpeak_attainment_pct, "server": self.server,
                "e2e_ttft_ms": o.e2e_ttft_ms if o else None,
                "gpu_budget_at_pct_ms": o.gpu_budget_at_pct_ms if o else None,
                "hours": [{"hour": h, "attainment_pct": v} for h, v in enumerate(self.hours)]}


def measured_server(figures: Mapping[str, float | None]) -> Server:
    """The log-normal of openai-mode streams' first-token times (their log moments), or None."""
    ln, ln2 = figures.get(LN_MEAN), figures.get(LN2_MEAN)
    if ln is None or ln2 is None:
        return None
    return LogNormal(ln, math.sqrt(max(0.0, ln2 - ln * ln)))


def _cases(w: Window, rows: Sequence[int]) -> tuple[list[int], Rtts, F64]:
    """The series of `rows` with RTT samples, as attainment cases: merged bins and the loss fraction."""
    from netprobe.store.hour_arrays import bin_values
    from netprobe.store.prefix import COUNTERS

    idx = np.asarray(rows, np.intp)
    have = idx[w.pos[idx].sum(axis=1) > 0].tolist()     # one step, not a sum per row
    values = bin_values(w.pos_lo, w.pos.shape[1])
    sent, received = w.c[have, COUNTERS.index("sent")], w.c[have, COUNTERS.index("received")]
    loss = np.where(sent > 0, (sent - received) / np.where(sent > 0, sent, 1.0), 0.0)
    return have, Rtts(values, w.pos[have]), loss


def _attain(req: SloRequest, w: Window, rows: Sequence[int], servers: Sequence[Server], drawn: bool = False
            ) -> dict[int, float]:
    """In slices of rows, so a fleet's every hour of day (24 cases a target) is never copied at once.
    `drawn`: for a chart (drawn_attainments: DRAWN_CELLS, DRAWN_PRUNE)."""
    out: dict[int, float] = {}
    pick = dict(zip(rows, servers, strict=True))
    for k in range(0, len(rows), SLICE):
        have, rtts, loss = _cases(w, rows[k:k + SLICE])
        mine = [pick[i] for i in have]
        got = drawn_attainments(rtts, loss, mine, req.model) if drawn else \
            attainments(rtts, loss, mine, req.model, GRID_CELLS, PRUNE)
        out.update(zip(have, got.tolist(), strict=True))
    return out


def series_slo(req: SloRequest, peak: Window, offpeak: Window | None, each_hour: Window | None,
               rows: Sequence[int], measured: Sequence[Server]) -> dict[int, SloFigures]:
    """Per series index in `rows`: its attainment at the peak (with the outcome when asked), off-peak
    and per local hour (`each_hour`: series-major, row i·24 + h). `measured`: per entry of `rows`, the
    server its openai-mode streams measured (None: none ran)."""
    servers = [req.server if req.server is not None else m for m in measured]
    source: list[ServerSource] = [
        "given" if req.server is not None else "measured" if m is not None else "none" for m in measured]
    at_peak = _attain(req, peak, rows, servers)
    off = _attain(req, offpeak, rows, servers) if offpeak is not None else {}
    outs: dict[int, Outcome] = {}
    if req.outcome:
        have, rtts, loss = _cases(peak, rows)
        pick = dict(zip(rows, servers, strict=True))
        outs = dict(zip(have, outcomes(rtts, loss, [pick[i] for i in have], req.model), strict=True))
    drawn: dict[int, tuple[tuple[float, float], ...]] = {}
    if req.curve:
        have, rtts, loss = _cases(peak, rows)
        pick = dict(zip(rows, servers, strict=True))
        got_curves = curves(rtts, loss, [pick[i] for i in have], req.model)
        drawn = {i: tuple(zip(xs.tolist(), fs.tolist(), strict=True)) for i, (xs, fs) in zip(have, got_curves,
                                                                                               strict=True)}
    hours: dict[int, list[float | None]] = {}
    if req.hours and each_hour is not None:
        got = _attain(req, each_hour, [i * 24 + h for i in rows for h in range(24)],
                      [s for s in servers for _ in range(24)], drawn=True)
        hours = {i: [got.get(i * 24 + h) for h in range(24)] for i in rows}
    return {i: SloFigures(req.model.ttft_ms, at_peak.get(i), off.get(i), tuple(hours.get(i, ())), source[k],
                          outs.get(i), drawn.get(i, ()))
            for k, i in enumerate(rows)}
