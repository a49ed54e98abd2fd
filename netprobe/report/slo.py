"""SLO attainment per row of the report (docs/numbers.md):
from each window's merged RTT bins and loss, and the
server's first-token time — given, or measured by openai-mode streams — computed for every series of
an agent at once (netprobe.budget.attainment)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from netprobe.budget.attainment import (
    DRAWN_CELLS,
    DRAWN_PRUNE,
    F64,
    Outcome,
    Rtts,
    Server,
    SloModel,
    attainments,
    curves,
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


def slo_request(ttft_ms: float, drawn: bool) -> SloRequest:
    """The report's SLO: a new TLS 1.3 connection, one call; `drawn`: per hour and the e2e curve too."""
    return SloRequest(SloModel(ttft_ms), hours=drawn, curve=drawn)


def measured_server(figures: Mapping[str, float | None]) -> Server:
    """The log-normal of openai-mode streams' first-token times (their log moments), or None."""
    ln, ln2 = figures.get(LN_MEAN), figures.get(LN2_MEAN)
    if ln is None or ln2 is None:
        return None
    return LogNormal(ln, math.sqrt(max(0.0, ln2 - ln * ln)))


# -- the figures --------------------------------------------------------------------------------------
# An agent's SLO figures for one RTT probe are computed as its rows are made, so only the agents in
# flight are held in memory.
Cases = tuple[list[int], Rtts, F64, list[Server]]    # case keys, their RTTs, loss fractions and servers


def _picked(w: Window, keys: Sequence[int], servers: Mapping[int, Server]) -> Cases:
    """The series of `keys` with RTT samples, as attainment cases: merged bins, the loss fraction and
    the server."""
    from netprobe.store.hour_arrays import bin_values
    from netprobe.store.prefix import COUNTERS

    idx = np.asarray(keys, np.intp)
    have = idx[w.pos[idx].sum(axis=1) > 0].tolist()     # one step, not a sum per row
    values = bin_values(w.pos_lo, w.pos.shape[1])
    sent, received = w.c[have, COUNTERS.index("sent")], w.c[have, COUNTERS.index("received")]
    loss = np.where(sent > 0, (sent - received) / np.where(sent > 0, sent, 1.0), 0.0)
    return have, Rtts(values, w.pos[have]), loss, [servers[i] for i in have]


def _slices(w: Window, keys: Sequence[int], servers: Mapping[int, Server]) -> tuple[Cases, ...]:
    """In slices of SLICE keys, so that no window's every series (or every hour of day) is copied at
    once; and cases of a shared server share a grid step within their slice, as they always have."""
    return tuple(_picked(w, keys[k:k + SLICE], servers) for k in range(0, len(keys), SLICE))


def _attained(model: SloModel, slices: Sequence[Cases], drawn: bool = False) -> dict[int, float]:
    """`drawn`: for a chart, on a coarser grid (DRAWN_CELLS, DRAWN_PRUNE)."""
    out: dict[int, float] = {}
    for have, rtts, loss, servers in slices:
        got = attainments(rtts, loss, servers, model, *((DRAWN_CELLS, DRAWN_PRUNE) if drawn else ()))
        out.update(zip(have, got.tolist(), strict=True))
    return out


def slo_figures(req: SloRequest, peak: Window, offpeak: Window | None, each_hour: Window | None,
                rows: Sequence[int], measured: Sequence[Server]) -> dict[int, SloFigures]:
    """Per series of `rows` (one agent's, of one RTT probe): its attainment at the peak (with the outcome
    when asked), off-peak, per local hour and its peak's end-to-end curve (when asked). `each_hour`:
    series-major, row i·24 + h (None: no hours). `measured`: per entry of `rows`, the server its
    openai-mode streams measured (None: none ran)."""
    model = req.model
    pick = dict(zip(rows, [req.server if req.server is not None else m for m in measured], strict=True))
    at_peak = _slices(peak, rows, pick)
    peak_got = _attained(model, at_peak)
    off = _attained(model, _slices(offpeak, rows, pick)) if offpeak is not None else {}
    outs: dict[int, Outcome] = {}
    lines: dict[int, tuple[tuple[float, float], ...]] = {}
    if req.outcome or req.curve:        # the peak's cases at once
        have, rtts, loss, servers = at_peak[0] if len(at_peak) == 1 else _picked(peak, rows, pick)
        if req.outcome:
            outs = dict(zip(have, outcomes(rtts, loss, servers, model), strict=True))
        if req.curve:
            lines = {i: tuple(zip(xs.tolist(), fs.tolist(), strict=True))
                     for i, (xs, fs) in zip(have, curves(rtts, loss, servers, model), strict=True)}
    by_hour: dict[int, float] | None = None
    if req.hours and each_hour is not None:
        keys = [i * 24 + h for i in rows for h in range(24)]
        hourly = {i * 24 + h: s for i, s in pick.items() for h in range(24)}
        by_hour = _attained(model, _slices(each_hour, keys, hourly), drawn=True)
    sources: list[ServerSource] = [
        "given" if req.server is not None else "measured" if m is not None else "none" for m in measured]
    return {i: SloFigures(model.ttft_ms, peak_got.get(i), off.get(i),
                          tuple(by_hour.get(i * 24 + h) for h in range(24)) if by_hour is not None else (),
                          source, outs.get(i), lines.get(i, ()))
            for i, source in zip(rows, sources, strict=True)}
