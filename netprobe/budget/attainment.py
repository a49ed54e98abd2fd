"""SLO attainment (docs/numbers.md): the share of requests whose time to first token meets the target, from
the route's RTT distribution and loss and the server's first-token distribution.

One request = `calls` model calls in series; one call = k round trips, then the server's first token.
A round trip is lost with the window's loss probability p, again on each retry, and every loss costs a
retransmission timeout before the retry: 1 s on the TCP handshake (the first round trip of a new
connection, RFC 6298's initial RTO), 200 ms + the mean RTT on every other trip (Linux's minimum RTO
over its smoothed RTT); each further loss of the same trip doubles it (RFC 6298 section 5.5's back-off).

So a call's time = Σ RTTᵢ + Σ RTOᵢ·(2^Lᵢ − 1) + server, Lᵢ ~ Geometric(p). The RTT sum and the server
are convolved on a grid (FFT); the timeouts are discrete shifts, kept apart and applied exactly:
F(x) = Σₐ P(shift a) · F_grid(x − a). A grid of GRID_CELLS cells spans each case's support; a value is
split between its two neighbouring cells so that means stay exact, and F is read between cells by
linear interpolation. Every case of a report (series × window) is computed in one batch.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np
import numpy.typing as npt

from netprobe.stats import LogNormal

F64 = npt.NDArray[np.float64]

HANDSHAKE_RTO_MS = 1000.0       # RFC 6298 (2.1): the initial RTO, which a lost SYN waits
MIN_RTO_MS = 200.0              # Linux's TCP_RTO_MIN, added to the smoothed RTT
GRID_CELLS = 2048               # 0.3 points against a Monte Carlo needs ~2,000 (1,024 was 0.4 off)
DRAWN_CELLS = 512               # for charts (an hour's bar, a curve): a quarter of the work, ~1 point
RTT_TOP_Q = 0.9999              # RTT mass above this quantile is read at it (≤ 0.01 points of error)
SERVER_TOP_Q = 0.99999
MAX_LOSSES = 8                  # losses per request followed: beyond, p^9 of the mass is dropped
# A loss pattern less likely than this is dropped from its case (< 1e-9 points): a case keeps a few dozen
# of the 95 patterns, so one with no server is usually decided without a grid.
PRUNE = 1e-12
DRAWN_PRUNE = 1e-6              # for charts (with DRAWN_CELLS): < 0.001 points, ≤ 22 patterns up to 5 % loss
QS = (0.50, 0.95, 0.99)
CHUNK = 256
BLOCK = 64                      # rows of a batch's arrays computed at a time (cache-sized)
CURVE_BLOCK = 16                # cases a curve's points are read for at a time (by loss: fewer timeouts)


@dataclass(frozen=True, slots=True)
class Dist:
    """A discrete distribution in ms: values (ascending) with weights summing to 1."""

    values: F64
    weights: F64

    @classmethod
    def of(cls, values: Sequence[float] | F64, weights: Sequence[float] | F64 | None = None) -> Dist:
        v = np.asarray(values, np.float64)
        w = np.ones_like(v) if weights is None else np.asarray(weights, np.float64)
        keep = w > 0
        v, w = v[keep], w[keep]
        if not len(v) or not np.isfinite(v).all() or (v < 0).any():
            raise ValueError("a distribution needs finite, non-negative values with positive weight")
        order = np.argsort(v, kind="stable")
        return cls(v[order], w[order] / w.sum())

    def quantile(self, q: float) -> float:
        cum = np.cumsum(self.weights)
        return float(self.values[min(int(np.searchsorted(cum, q - 1e-12)), len(cum) - 1)])


Server = LogNormal | Dist | None      # None: no server time (the network's share alone)


@dataclass(frozen=True, slots=True)
class Rtts:
    """The RTT distributions of r cases over common values (a report's bins): weights [r, W]."""

    values: F64
    weights: F64

    @classmethod
    def of(cls, dists: Sequence[Dist]) -> Rtts:
        values = np.unique(np.concatenate([d.values for d in dists]))
        weights = np.zeros((len(dists), len(values)))
        for i, d in enumerate(dists):
            weights[i, np.searchsorted(values, d.values)] = d.weights
        return cls(values, weights)

    def __len__(self) -> int:
        return len(self.weights)


@dataclass(frozen=True, slots=True)
class SloModel:
    ttft_ms: float
    round_trips: int = 3            # before the first byte: 3 new TCP + TLS 1.3, 4 TLS 1.2, 1 warm
    handshake: bool = True          # the first round trip is a TCP handshake (a new connection)
    calls: int = 1
    pct: float = 95.0               # X of "the GPU budget at X %"


@dataclass(frozen=True, slots=True)
class Outcome:
    attainment_pct: float
    e2e_ttft_ms: dict[str, float]           # p50, p95, p99 of network + server
    gpu_budget_at_pct_ms: float | None      # the largest server P-X keeping attainment ≥ X; None: none does


# -- the timeouts -------------------------------------------------------------------------------------
@cache
def _loss_patterns(handshakes: int, others: int) -> tuple[F64, F64, F64, F64]:
    """Every way ≤ MAX_LOSSES losses fall on the trips, grouped: (handshake RTO multiples, other RTO
    multiples, losses, ways) — the shift is h·1000 + o·RTO and its probability ways·p^L·(1 − p)^n."""
    n = handshakes + others
    groups: dict[tuple[int, int, int], int] = {}
    for ls in itertools.product(range(MAX_LOSSES + 1), repeat=n):
        total = sum(ls)
        if total > MAX_LOSSES:
            continue
        key = (sum(2 ** x - 1 for x in ls[:handshakes]), sum(2 ** x - 1 for x in ls[handshakes:]), total)
        groups[key] = groups.get(key, 0) + 1
    rows = np.array([(*k, w) for k, w in sorted(groups.items())], np.float64)
    return rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3]


def _shifts(loss: F64, rto: F64, m: SloModel, prune: float = PRUNE) -> tuple[F64, F64]:
    """[r, A] shifts (ms) and their probabilities (renormalised: what MAX_LOSSES leaves out is spread)."""
    handshakes = m.calls if m.handshake else 0
    h, o, lost, ways = _loss_patterns(handshakes, m.calls * m.round_trips - handshakes)
    n = m.calls * m.round_trips
    # the weights depend on the loss alone: made once per distinct loss (a fleet's hours repeat a few)
    distinct, back = np.unique(np.clip(loss, 0.0, 0.999), return_inverse=True)
    p = distinct[:, None]
    powers = p ** np.arange(MAX_LOSSES + 1)[None, :]           # the same pow()s as p ** lost, 9 not 95
    w = ways[None, :] * powers[:, lost.astype(np.intp)] * (1 - p) ** n  # each trip: losses, then a success
    w /= w.sum(axis=1, keepdims=True)
    w[w < prune] = 0.0
    w /= w.sum(axis=1, keepdims=True)
    return h[None, :] * HANDSHAKE_RTO_MS + o[None, :] * rto[:, None], w[back.reshape(-1)]


def _kept(shifts: F64, w: F64) -> tuple[F64, F64]:
    """Only the patterns some case of a batch still has (a loss-free batch keeps one of 95)."""
    used = w.any(axis=0)
    return shifts[:, used], w[:, used]


# -- the grid -----------------------------------------------------------------------------------------
def _place(values: F64, weights: F64, step: F64, top: F64, cells: int) -> F64:
    """[r, cells]: each row's mass at values/step[i] (capped at top[i]), split between neighbours. Only
    the non-zero weights are placed (an hour's RTT has ~12 of a window's ~150 bins): the same sums."""
    r = len(weights)
    rows, cols = np.nonzero(weights != 0)     # on booleans: twice as fast as on floats
    mass = weights[rows, cols]
    pos = np.minimum(values[cols], top[rows]) / step[rows]
    idx = np.minimum(np.floor(pos).astype(np.int64), cells - 1)
    frac = np.where(idx >= cells - 1, 0.0, pos - idx)
    base = rows * cells
    out = np.bincount(base + idx, mass * (1 - frac), r * cells)
    out += np.bincount(base + np.minimum(idx + 1, cells - 1), mass * frac, r * cells)
    grid: F64 = out.reshape(r, cells).astype(np.float64)
    return grid


def _quantile_rows(values: F64, weights: F64, q: float) -> F64:
    """Each row's q-quantile of `values`: the first value whose running weight reaches q of the row's,
    run over each row's non-zero weights only, packed to the left (a zero weight never moves it)."""
    r, width = weights.shape
    rows, cols = np.nonzero(weights != 0)
    if not len(cols):
        nothing: F64 = values[np.zeros(r, np.intp)]
        return nothing
    counts = np.bincount(rows, minlength=r)
    starts = np.cumsum(counts) - counts
    packed = np.zeros((r, int(counts.max())))
    packed[rows, np.arange(len(rows)) - starts[rows]] = weights[rows, cols]
    cum = np.cumsum(packed, axis=1)
    below = q * cum[:, -1] - 1e-12
    reached = (cum < below[:, None]).sum(axis=1)
    idx = np.where(reached < counts, cols[np.minimum(starts + reached, len(cols) - 1)], width)
    idx = np.where((counts > 0) & (below > 0), idx, 0)     # nothing below a bound ≤ 0: the first value
    got: F64 = values[np.minimum(idx, width - 1)]
    return got


def _erfc(z: F64) -> F64:
    """erfc, vectorised (Numerical Recipes' Chebyshev fit: fractional error < 1.2e-7): math.erfc per
    cell is a Python call for each of a distribution's cells."""
    a = np.abs(z)
    t = 1.0 / (1.0 + 0.5 * a)
    poly = -a * a - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
        -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (
            -0.82215223 + t * 0.17087277))))))))
    r: F64 = t * np.exp(poly)
    return np.where(z >= 0, r, 2.0 - r)


def _server_top(s: Server) -> float:
    if s is None:
        return 0.0
    if isinstance(s, Dist):
        return float(s.values[-1])
    return s.quantile(SERVER_TOP_Q)


def _server_grids(servers: Sequence[Server], step: F64, cells: int) -> F64:
    """[r, cells]: each server's mass on its row's grid (a log-normal's by its CDF at the cells' edges,
    a cell centred on its grid point; every log-normal of the batch in one step)."""
    out = np.zeros((len(servers), cells))
    logn: list[int] = []
    for i, s in enumerate(servers):
        if s is None:
            out[i, 0] = 1.0
        elif isinstance(s, Dist):
            out[i] = _place(s.values, s.weights[None, :], step[i:i + 1], np.array([s.values[-1]]), cells)[0]
        elif s.zero or not s.sigma:
            v = np.array([s.quantile(0.5)])
            out[i] = _place(v, np.ones((1, 1)), step[i:i + 1], v, cells)[0]
        else:
            logn.append(i)
    if logn:
        mu = np.array([servers[i].mu for i in logn])[:, None]          # type: ignore[union-attr]
        sigma = np.array([servers[i].sigma for i in logn])[:, None]    # type: ignore[union-attr]
        edges = np.maximum((np.arange(cells + 1)[None, :] - 0.5) * step[logn][:, None], 1e-300)
        cdf = 0.5 * _erfc(-(np.log(edges) - mu) / (sigma * math.sqrt(2)))
        cdf[:, 0], cdf[:, -1] = 0.0, 1.0
        out[logn] = np.diff(cdf, axis=1)
    return out


@dataclass(frozen=True, slots=True)
class _Totals:
    """Requests' times, one row per case: a grid (cells of step[i] ms from 0, cumulative) plus shifts."""

    step: F64                       # [r]
    padded: F64                     # [r, cells + 1]: 0, then the cumulative grid
    shifts: F64                     # [r, A]
    shift_w: F64                    # [r, A]

    def cdf(self, x: F64) -> F64:
        """F at x ([r] or [r, q]), each row at its own points: between the cells around x − shift, a
        point below the grid reading 0 and one above it the last cell (the padded grid, read flat)."""
        xs = np.asarray(x, np.float64)
        flat = xs.reshape(len(self.step), -1)
        pos = (flat[:, :, None] - self.shifts[:, None, :]) / self.step[:, None, None]   # [r, q, A]
        idx = np.floor(pos)
        frac = pos - idx
        width = self.padded.shape[1]
        base = (np.arange(len(self.step)) * width)[:, None, None]
        at = idx.astype(np.int64) + 1                    # cell idx's place in its padded row
        grid = self.padded.ravel()
        lo = grid[base + np.clip(at, 0, width - 1)]
        hi = grid[base + np.clip(at + 1, 0, width - 1)]
        out: F64 = np.minimum(1.0, ((lo + (hi - lo) * frac) * self.shift_w[:, None, :]).sum(axis=2))
        return out.reshape(xs.shape)

    def rows(self, which: slice) -> _Totals:
        """These cases alone, with the timeouts they have."""
        return _Totals(self.step[which], self.padded[which], *_kept(self.shifts[which], self.shift_w[which]))

    def quantiles(self, qs: Sequence[float]) -> F64:
        """[r, len(qs)] by bisection, every row and quantile at once."""
        r = len(self.step)
        q = np.broadcast_to(np.asarray(qs, np.float64), (r, len(qs)))
        lo = np.zeros((r, len(qs)))
        top = self.step * (self.padded.shape[1] - 1) + (self.shifts * (self.shift_w > 0)).max(axis=1)
        hi = np.broadcast_to(top[:, None], (r, len(qs))).copy()
        for _ in range(48):
            mid = (lo + hi) / 2
            below = self.cdf(mid) < q
            lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        return hi


def _spread(rtts: Rtts) -> tuple[F64, F64]:
    """The cases' RTT weights normalised, and the RTT_TOP_Q quantile each grid is capped at."""
    w = rtts.weights / rtts.weights.sum(axis=1, keepdims=True)
    return w, _quantile_rows(rtts.values, w, RTT_TOP_Q)


def _steps(rtt_top: F64, servers: Sequence[Server], groups: list[list[int]], m: SloModel, cells: int) -> F64:
    """Each case's grid step: its grid spans the request's support; cases that share a server (`groups`)
    share the widest of their steps, so the server's grid and FFT are made once for them."""
    tops = np.zeros(len(servers))
    for group in groups:                 # one quantile per distinct server
        tops[group] = _server_top(servers[group[0]])
    span = m.calls * (m.round_trips * rtt_top + tops)
    for group in groups:
        if servers[group[0]] is not None and len(group) > 1:
            span[group] = span[group].max()
    step: F64 = np.maximum(span, 1e-3) / (cells - 1)
    return step


class _Batch:
    """The cases' network grids and timeouts, computed once; the server is applied per evaluation (the
    GPU budget's search varies it alone). Cases that share a server (a report's given one, or none)
    share a grid step, so its grid and FFT are made once."""

    def __init__(self, rtts: Rtts, loss: F64, servers: Sequence[Server], m: SloModel,
                 cells: int = GRID_CELLS, prune: float = PRUNE, timeouts: tuple[F64, F64] | None = None,
                 spread: tuple[F64, F64] | None = None, step: F64 | None = None) -> None:
        """`timeouts`, `spread`, `step`: the cases' _shifts, _spread and _steps when the caller has them
        already (attainments: _decided's, and the steps of a larger batch this one is a block of)."""
        self.m, self.servers, self.cells = m, list(servers), cells
        self.groups = _groups(self.servers)
        w, rtt_top = _spread(rtts) if spread is None else spread
        self.step = _steps(rtt_top, self.servers, self.groups, m, cells) if step is None else step
        self.f_net = _power(np.fft.rfft(_place(rtts.values, w, self.step, rtt_top, cells), 2 * cells, axis=1),
                            m.round_trips)
        if timeouts is None:
            timeouts = _shifts(np.asarray(loss, np.float64), MIN_RTO_MS + w @ rtts.values, m, prune)
        self.shifts, self.shift_w = _kept(*timeouts)

    def totals(self, servers: Sequence[Server] | None = None) -> _Totals:
        n, cells = 2 * self.cells, self.cells
        f = self.f_net.copy()
        groups = self.groups if servers is None else _groups(servers)
        servers = self.servers if servers is None else servers
        # one server grid per group on one step, else one per case; all of them in one batch
        made: list[int] = []                # the case whose server and step each grid is made for
        rows: list[int] = []                # the cases each applies to, grid by grid
        sizes: list[int] = []
        for group in groups:
            if servers[group[0]] is None:
                continue                    # no server: a unit mass at 0, whose transform is 1
            if len(group) > 1 and self._one_step(group):
                made.append(group[0])
                rows += group
                sizes.append(len(group))
            else:
                made += group
                rows += group
                sizes += [1] * len(group)
        if made:
            grids = np.fft.rfft(_server_grids([servers[i] for i in made], self.step[made], cells), n, axis=1)
            f[rows] *= grids[np.repeat(np.arange(len(made)), sizes)]
        pmf = np.fft.irfft(_power(f, self.m.calls), n, axis=1)[:, :cells]
        pmf[pmf < 1e-15] = 0.0              # FFT round-off
        padded = np.zeros((len(pmf), cells + 1))
        np.cumsum(pmf, axis=1, out=padded[:, 1:])
        padded[:, 1:] /= padded[:, -1:].copy()
        return _Totals(self.step, padded, self.shifts, self.shift_w)

    def _one_step(self, group: list[int]) -> bool:
        return bool((self.step[group] == self.step[group[0]]).all())

    def attainment(self, servers: Sequence[Server] | None = None) -> F64:
        return self.totals(servers).cdf(np.full(len(self.step), self.m.ttft_ms))


def _power(f: npt.NDArray[np.complex128], k: int) -> npt.NDArray[np.complex128]:
    """f ** k by multiplication (NumPy's complex power goes through exp and log, far slower)."""
    out = f
    for _ in range(k - 1):
        out = out * f
    return out


def _groups(servers: Sequence[Server]) -> list[list[int]]:
    """Case indexes by server: the same object or an equal log-normal."""
    by: dict[object, list[int]] = {}
    for i, s in enumerate(servers):
        by.setdefault(s if not isinstance(s, Dist) else id(s), []).append(i)
    return list(by.values())


def attainments(rtts: Rtts, loss: Sequence[float] | F64, servers: Sequence[Server], m: SloModel,
                cells: int = GRID_CELLS, prune: float = PRUNE) -> F64:
    """100 · P(a request's first token within m.ttft_ms), per case (`cells`, `prune`: DRAWN_CELLS and
    DRAWN_PRUNE for a chart)."""
    if not len(rtts):
        return np.zeros(0)
    loss = np.asarray(loss, np.float64)
    w, rtt_top = _spread(rtts)
    out, rest, (shifts, sw) = _decided(rtts, loss, servers, m, cells, prune, (w, rtt_top))
    for part in _chunks(rest, loss):
        mine = [servers[i] for i in part]
        step = _steps(rtt_top[part], mine, _groups(mine), m, cells)
        # a batch's steps are its chunk's, its arrays a block's: [BLOCK, 2·cells] stay in the CPU's cache
        for k in range(0, len(part), BLOCK):
            block, there = part[k:k + BLOCK], slice(k, k + BLOCK)
            out[block] = 100.0 * _Batch(Rtts(rtts.values, rtts.weights[block]), loss[block], mine[there], m,
                                        cells, prune, (shifts[block], sw[block]), (w[block], rtt_top[block]),
                                        step[there]).attainment()
    return out


def _chunks(idx: Sequence[int], loss: F64, size: int = CHUNK) -> list[list[int]]:
    """Cases in batches of `size` ([size, 2·GRID_CELLS] complex arrays), by loss so that a batch's
    cases keep about as many loss patterns (PRUNE)."""
    cases = np.asarray(idx, np.intp)
    order: list[int] = cases[np.argsort(loss[cases], kind="stable")].tolist()
    return [order[k:k + size] for k in range(0, len(order), size)]


def _decided(rtts: Rtts, loss: F64, servers: Sequence[Server], m: SloModel, cells: int, prune: float,
             spread: tuple[F64, F64], timeouts: tuple[F64, F64] | None = None
             ) -> tuple[F64, list[int], tuple[F64, F64]]:
    """Cases without a server whose every timeout lands the target clear of the RTT sum's support
    (all of it before, or none): their attainment is the timeouts' weight alone, with no grid. A
    report's 1 s target on an RTT of tens of ms is decided so. The rest are listed for the grid, and
    every case's timeouts (_shifts, unless given) returned for it. `spread`: the cases' _spread."""
    w, rtt_top = spread
    n = m.calls * m.round_trips
    upper = n * rtt_top
    first = np.argmax(w > 0, axis=1)
    lower = n * rtts.values[first] - (n + 1) * upper / (cells - 1)    # the grid's split cells
    shifts, sw = _shifts(loss, MIN_RTO_MS + w @ rtts.values, m, prune) if timeouts is None else timeouts
    left = m.ttft_ms - shifts
    clear = ((left >= upper[:, None]) | (left < lower[:, None]) | (sw == 0)).all(axis=1)
    clear &= np.array([s is None for s in servers])
    out = np.where(clear, 100.0 * (sw * (left >= upper[:, None])).sum(axis=1), 0.0)
    return out, [i for i in range(len(servers)) if not clear[i]], (shifts, sw)


def outcomes(rtts: Rtts, loss: Sequence[float] | F64, servers: Sequence[Server], m: SloModel
             ) -> list[Outcome]:
    """Attainment, the end-to-end TTFT's P50/P95/P99 and the GPU budget at m.pct, per case."""
    loss = np.asarray(loss, np.float64)
    out: dict[int, Outcome] = {}
    for part in _chunks(range(len(rtts)), loss):
        batch = _Batch(Rtts(rtts.values, rtts.weights[part]), loss[part], [servers[i] for i in part], m)
        totals = batch.totals()
        got = totals.cdf(np.full(len(part), m.ttft_ms))
        qs = totals.quantiles(QS)
        budgets = _gpu_budgets(batch)
        out.update((i, Outcome(100.0 * float(got[k]),
                               {f"p{round(q * 100)}": float(v) for q, v in zip(QS, qs[k], strict=True)},
                               budgets[k])) for k, i in enumerate(part))
    return [out[i] for i in range(len(rtts))]


def curves(rtts: Rtts, loss: Sequence[float] | F64, servers: Sequence[Server], m: SloModel,
           points: int = 48, cells: int = DRAWN_CELLS) -> list[tuple[F64, F64]]:
    """Per case, the end-to-end TTFT's CDF at `points` times from 0 to its 99.5th percentile: (ms, F)."""
    loss = np.asarray(loss, np.float64)
    out: dict[int, tuple[F64, F64]] = {}
    for part in _chunks(range(len(rtts)), loss):
        totals = _Batch(Rtts(rtts.values, rtts.weights[part]), loss[part], [servers[i] for i in part],
                        m, cells, DRAWN_PRUNE).totals()
        top = totals.quantiles((0.995,))[:, 0]
        xs = top[:, None] * np.linspace(0.0, 1.0, points)[None, :]
        # read in blocks of cases of about the same loss, each with only the timeouts it has: a batch
        # keeps every pattern any of its cases has (up to 34), a case 5 in the middle
        fs = np.concatenate([totals.rows(slice(k, k + CURVE_BLOCK)).cdf(xs[k:k + CURVE_BLOCK])
                             for k in range(0, len(part), CURVE_BLOCK)])
        out.update((i, (xs[k], fs[k])) for k, i in enumerate(part))
    return [out[i] for i in range(len(rtts))]


def _scaled(s: Server, c: float) -> Server:
    if isinstance(s, Dist):
        return Dist(s.values * c, s.weights)
    if isinstance(s, LogNormal) and not s.zero:
        return LogNormal(s.mu + math.log(c), s.sigma)
    return s


def _gpu_budgets(batch: _Batch) -> list[float | None]:
    """The largest P-X (m.pct) of the server's time per call that keeps attainment ≥ X %: the server's
    shape (measured or given) scaled, by bisection over the batch; without one, a fixed time per call,
    what the network's X-quantile leaves. None where the network alone misses X %."""
    m, x = batch.m, batch.m.pct / 100
    r = len(batch.step)
    net_q = batch.totals([None] * r).quantiles((x,))[:, 0]
    p_x = np.array([0.0 if s is None else s.quantile(x) for s in batch.servers])
    out: list[float | None] = [(m.ttft_ms - float(net_q[i])) / m.calls if net_q[i] < m.ttft_ms else None
                               for i in range(r)]
    shaped = p_x > 0
    if not shaped.any():
        return out
    lo, hi = np.zeros(r), np.where(shaped, m.ttft_ms / np.where(shaped, p_x, 1.0), 0.0)
    for _ in range(14):                   # to 1/16,384 of the target: 0.06 ms of a 1 s budget
        mid = (lo + hi) / 2
        ok = batch.attainment([_scaled(s, float(c)) if c > 0 else s
                               for s, c in zip(batch.servers, mid, strict=True)]) >= x
        lo, hi = np.where(ok, mid, lo), np.where(ok, hi, mid)
    return [float(lo[i] * p_x[i]) if shaped[i] and out[i] is not None else out[i] for i in range(r)]


# -- one case ------------------------------------------------------------------------------------------
def attainment_pct(rtt: Dist, loss: float, server: Server, m: SloModel) -> float:
    return float(attainments(Rtts.of([rtt]), [loss], [server], m)[0])
