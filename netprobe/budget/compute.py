"""The latency budget (docs/reports.md, docs/api.md): what a time-to-first-token target leaves the GPU.

network_ms = network_floor_ms × round_trips × calls, where the floor is the evening-peak P95 RTT and
round_trips counts the trips before the first byte (1 on a warm keep-alive connection, 3 on a new
TCP + TLS 1.3 one, 4 with TLS 1.2). gpu_budget_ms = ttft − network_ms − jitter_margin_ms, with the
margin = peak P95 − P50 of the SSE delay variation (or of the RTT without SSE data), once per call.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from netprobe.errors import UsageError

if TYPE_CHECKING:
    from netprobe.report.rows import PeakRow
    from netprobe.report.slo import SloFigures

TlsVersion = Literal["1.2", "1.3"]


@dataclass(frozen=True, slots=True)
class Candidate:
    """One region × target at the evening peak (from `report peak`'s rows)."""

    agent: str
    region: str
    target: str
    datacenter: str
    line: str
    rtt_p50_ms: float
    rtt_p95_ms: float
    delay_var_p50_ms: float | None = None   # sse emitter streams
    delay_var_p95_ms: float | None = None
    gap_p95_ms: float | None = None
    stalls_per_min: float | None = None
    server_first_ms: float | None = None    # sse openai streams: queue + prefill + first token
    tpot_ms: float | None = None
    ret_delay_var_p50_ms: float | None = None   # owd: the way back, where streamed tokens travel
    ret_delay_var_p95_ms: float | None = None
    slo: SloFigures | None = None              # attainment (budget --slo-ttft-ms)


@dataclass(frozen=True, slots=True)
class BudgetParams:
    ttft_ms: float
    tpot_ms: float | None = None
    tls: TlsVersion = "1.3"
    keepalive: bool = False
    calls: int = 1

    @property
    def round_trips(self) -> int:
        if self.keepalive:
            return 1
        return 4 if self.tls == "1.2" else 3


@dataclass(frozen=True, slots=True)
class BudgetRow:
    agent: str
    region: str
    target: str
    datacenter: str
    line: str
    network_floor_ms: float
    round_trips: int
    calls: int
    network_ms: float
    jitter_margin_ms: float
    jitter_source: str               # "owd-ret" (return delay variation), "sse" (the stream's) or "rtt"
    gpu_budget_ms: float             # queue + prefill + first token may take this long
    gpu_measured_ms: float | None    # what openai-mode streams measured for it, if any
    tpot_target_ms: float | None
    tpot_measured_ms: float | None
    gap_p95_ms: float | None
    stalls_per_min: float | None
    tpot_ok: bool | None             # None: no --tpot-ms or nothing measured to check it against
    feasible: bool
    why: str                         # the first segment over budget, "" when feasible
    rank: int = 0                    # 1 = most GPU budget within the region (most attainment with an SLO)
    slo: SloFigures | None = None

    def to_dict(self) -> dict[str, Any]:
        d = {f: getattr(self, f) for f in self.__dataclass_fields__ if f != "slo"}
        return d | (_slo_dict(self.slo, self.tpot_ok) if self.slo is not None else {})

    @property
    def attainment_pct(self) -> float | None:
        """The share meeting the SLO at the peak; with a TPOT target, 0 when the stream misses it."""
        if self.slo is None or self.slo.attainment_pct is None:
            return None
        return 0.0 if self.tpot_ok is False else self.slo.attainment_pct


def _slo_dict(slo: SloFigures, tpot_ok: bool | None) -> dict[str, Any]:
    d = slo.to_dict()
    if tpot_ok is False:         # a request must meet both targets (vLLM's goodput)
        d["attainment_pct"] = 0.0
        d["offpeak_attainment_pct"] = 0.0 if d["offpeak_attainment_pct"] is not None else None
    return d


def jitter_margin(c: Candidate) -> tuple[float, str]:
    """P95 − P50 of the delay variation the tokens meet: owd's return direction when owd ran (the
    network's own share, the way the stream travels), else the SSE stream's, else the RTT's."""
    if c.ret_delay_var_p50_ms is not None and c.ret_delay_var_p95_ms is not None:
        return max(0.0, c.ret_delay_var_p95_ms - c.ret_delay_var_p50_ms), "owd-ret"
    if c.delay_var_p50_ms is not None and c.delay_var_p95_ms is not None:
        return max(0.0, c.delay_var_p95_ms - c.delay_var_p50_ms), "sse"
    return max(0.0, c.rtt_p95_ms - c.rtt_p50_ms), "rtt"


def tpot_check(tpot_ms: float | None, gap_p95_ms: float | None, stalls_per_min: float | None,
               target: float | None) -> bool | None:
    """Streaming keeps up when the measured per-token time and the peak gap P95 stay within the
    target and the stream does not stall."""
    if target is None:
        return None
    seen = [v for v in (tpot_ms, gap_p95_ms) if v is not None]
    if not seen and stalls_per_min is None:
        return None
    return all(v <= target for v in seen) and not (stalls_per_min or 0.0) > 0.0


def budget_row(c: Candidate, p: BudgetParams) -> BudgetRow:
    network = c.rtt_p95_ms * p.round_trips * p.calls
    margin, source = jitter_margin(c)
    margin *= p.calls
    gpu = p.ttft_ms - network - margin
    tpot_ok = tpot_check(c.tpot_ms, c.gap_p95_ms, c.stalls_per_min, p.tpot_ms)
    measured = c.server_first_ms * p.calls if c.server_first_ms is not None else None
    why = ""
    if gpu <= 0:
        why = "network"
    elif measured is not None and measured > gpu:
        why = "gpu"
    elif tpot_ok is False:
        why = "tpot"
    return BudgetRow(
        agent=c.agent, region=c.region, target=c.target, datacenter=c.datacenter, line=c.line,
        network_floor_ms=c.rtt_p95_ms, round_trips=p.round_trips, calls=p.calls, network_ms=network,
        jitter_margin_ms=margin, jitter_source=source, gpu_budget_ms=gpu, gpu_measured_ms=measured,
        tpot_target_ms=p.tpot_ms, tpot_measured_ms=c.tpot_ms, gap_p95_ms=c.gap_p95_ms,
        stalls_per_min=c.stalls_per_min, tpot_ok=tpot_ok, feasible=not why, why=why, slo=c.slo)


def budget_rows(candidates: list[Candidate], params: BudgetParams) -> list[BudgetRow]:
    """One row per candidate, ranked within each region by GPU budget (most first)."""
    rows = [budget_row(c, params) for c in candidates]
    ranked: list[BudgetRow] = []
    for region in sorted({r.region for r in rows}):
        mine = sorted((r for r in rows if r.region == region), key=_order)
        ranked += [replace(r, rank=i + 1) for i, r in enumerate(mine)]
    return ranked


def _order(r: BudgetRow) -> tuple[float, float, str, str]:
    """Most attainment first when an SLO was given (then most GPU budget), else most GPU budget."""
    got = r.attainment_pct
    return (-(got if got is not None else -1.0) if r.slo is not None else 0.0, -r.gpu_budget_ms, r.target,
            r.agent)


def budget_params(ttft_ms: float, tpot_ms: float | None, tls: str, keepalive: bool,
                  calls: int) -> BudgetParams:
    """The budget options checked (a UsageError names the bad one); `diagnose` shares them."""
    if not ttft_ms > 0:
        raise UsageError(f"--ttft-ms: must be positive, got {ttft_ms:g}")
    if tpot_ms is not None and not tpot_ms > 0:
        raise UsageError(f"--tpot-ms: must be positive, got {tpot_ms:g}")
    if tls not in ("1.2", "1.3"):
        raise UsageError(f"--tls: expected 1.2 or 1.3, got {tls!r}")
    if calls < 1:
        raise UsageError(f"--calls: must be at least 1, got {calls}")
    return BudgetParams(ttft_ms=ttft_ms, tpot_ms=tpot_ms, tls="1.2" if tls == "1.2" else "1.3",
                        keepalive=keepalive, calls=calls)


def candidate(row: PeakRow) -> Candidate | None:
    """A report row as a budget candidate; None when the peak window has no RTT."""
    p = row.peak
    if p.rtt_p50_ms is None or p.rtt_p95_ms is None:
        return None
    return Candidate(agent=row.agent, region=row.region or "", target=row.target,
                     datacenter=row.datacenter or "", line=row.line or "", rtt_p50_ms=p.rtt_p50_ms,
                     rtt_p95_ms=p.rtt_p95_ms, delay_var_p50_ms=p.figure("sse_delay_var_p50_ms"),
                     delay_var_p95_ms=p.figure("sse_delay_var_p95_ms"),
                     gap_p95_ms=p.figure("sse_gap_p95_ms"), stalls_per_min=p.figure("stalls_per_min"),
                     server_first_ms=p.figure("sse_server_first_ms"),
                     tpot_ms=p.figure("sse_tpot_ms"), ret_delay_var_p50_ms=p.figure("ret_delay_var_p50_ms"),
                     ret_delay_var_p95_ms=p.figure("ret_delay_var_p95_ms"), slo=row.slo)
