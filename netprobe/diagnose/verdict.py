"""Which segment of the TTFT budget is over, and what it points to. Pure: records in, a Verdict out.

The budget is netprobe.budget.compute's: network_ms = floor × round trips × calls, a jitter margin,
and gpu_budget_ms = ttft − network_ms − margin for queue + prefill + first token. Rules, first match:
  failed   — the URL gave no stream (or no floor could be measured): nothing to budget;
  network  — network_ms + margin ≥ ttft: the route alone spends it;
  gpu      — one request's server share × calls > gpu_budget_ms (prefill / first token too slow);
  capacity — at some concurrency the estimated server share goes over, or streams fail, while one
             request fits (queueing);
  tpot     — with --tpot-ms: TPOT or gap P95 over it, or stalls (single request), or the sweep's TPOT
             P95 over it at some level;
  None     — within budget.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

from netprobe.budget.compute import BudgetParams, BudgetRow, Candidate, budget_row, tpot_check

from .steps import NetworkFloor, SingleRequest, Sweep, SweepLevel

Segment = Literal["network", "gpu", "capacity", "tpot", "failed"]


@dataclass(frozen=True, slots=True)
class LevelCheck:
    concurrency: int
    server_est_ms: float | None   # one request's server share + how much TTFT P95 grew over it
    over: bool
    why: str | None               # "errors", "ttft", "tpot" or None


@dataclass(frozen=True, slots=True)
class Verdict:
    segment: Segment | None
    message: str
    advice: str = ""
    level: int | None = None      # capacity/tpot: the first concurrency that breaks
    budget: BudgetRow | None = None
    levels: tuple[LevelCheck, ...] = ()
    attainment_pct: float | None = None   # requests within the TTFT (docs/numbers.md): RTTs, loss, server

    @property
    def within_budget(self) -> bool:
        return self.segment is None

    def to_dict(self) -> dict[str, Any]:
        return {"segment": self.segment, "message": self.message, "advice": self.advice,
                "level": self.level, "within_budget": self.within_budget,
                "attainment_pct": self.attainment_pct}


def attainment(net: NetworkFloor, single: SingleRequest, params: BudgetParams) -> float | None:
    """The share of requests whose first token meets the TTFT: the floor's RTT distribution and loss,
    the measured request's server share (one request: a fixed time), the budget's round trips."""
    from netprobe.budget.attainment import Dist, SloModel, attainment_pct

    if not net.rtt_dist:
        return None
    rtt = Dist.of([v for v, _ in net.rtt_dist], [w for _, w in net.rtt_dist])
    server = Dist.of([single.server_ms]) if single.server_ms is not None else None
    model = SloModel(params.ttft_ms, round_trips=params.round_trips, handshake=not params.keepalive,
                     calls=params.calls)
    return attainment_pct(rtt, (net.loss_pct or 0.0) / 100, server, model)


def budget_for(net: NetworkFloor, params: BudgetParams) -> BudgetRow | None:
    if net.floor_ms is None or net.rtt_p50_ms is None:
        return None
    c = Candidate(agent=net.agent or "", region="", target=net.target or net.host, datacenter="",
                  line=net.line or "", rtt_p50_ms=net.rtt_p50_ms, rtt_p95_ms=net.floor_ms,
                  delay_var_p50_ms=net.delay_var_p50_ms, delay_var_p95_ms=net.delay_var_p95_ms)
    return budget_row(c, params)


def check_levels(single: SingleRequest, sweep: Sweep, gpu_budget_ms: float, params: BudgetParams
                 ) -> tuple[LevelCheck, ...]:
    """Per level: the server share it implies. TTFT P95 at a level minus the single request's first event
    is the queueing added; the route is the same in both, so the network cancels (stored or live)."""
    out = []
    for lv in sweep.levels:
        est: float | None = None
        if lv.ttft_p95_ms is not None and single.first_event_ms is not None and single.server_ms is not None:
            est = single.server_ms + max(0.0, lv.ttft_p95_ms - single.first_event_ms)
        why: str | None = None
        if lv.errors > 0:
            why = "errors"
        elif est is not None and est * params.calls > gpu_budget_ms:
            why = "ttft"
        elif params.tpot_ms is not None and lv.tpot_p95_ms is not None and lv.tpot_p95_ms > params.tpot_ms:
            why = "tpot"
        out.append(LevelCheck(lv.concurrency, est, why is not None, why))
    return tuple(out)


def _failed_advice(single: SingleRequest, net: NetworkFloor) -> str:
    kind = single.error_kind or ""
    if single.http_status in (401, 403):
        return "the server refused the credentials: check --api-key-file"
    if single.http_status in (404, 405):
        return "wrong path or method for this --mode (emitter: GET …/sse, openai: POST …/v1/chat/completions)"
    if kind == "connect":
        if net.floor_ms is not None:   # the host answered step 1, so it is the port or the server
            return (f"{net.host} answers ({net.method}), but nothing accepts the connection: check the port "
                    "and that the server runs")
        return "neither the host nor the port answered: check the host, the port and the route"
    return {"dns": "the host name does not resolve",
            "tls": "the TLS handshake failed: check the certificate and the scheme (http vs https)",
            "timeout": "no complete answer in time: raise --timeout, or the server never streams",
            "stalled": "the stream stopped sending: the server hung or a proxy buffers it",
            "malformed": "not an SSE stream this --mode understands: check --mode and the path",
            "no_events": "the stream ended without content: check --mode and the request",
            }.get(kind, "check the URL, --mode and the server's logs")


def _ms(v: float) -> str:
    return f"{v:.0f} ms" if v >= 10 else f"{v:.2f} ms"


def decide(net: NetworkFloor, single: SingleRequest, sweep: Sweep, params: BudgetParams) -> Verdict:
    """The first rule that matches (module docstring), with the attainment in its message: the worst
    case adds P95s, attainment says how many requests the segment costs."""
    v = _decide(net, single, sweep, params)
    if not single.ok or v.budget is None:
        return v
    got = attainment(net, single, params)
    share = "" if got is None else f"; {got:.1f} % of requests within {params.ttft_ms:g} ms (attainment)"
    return replace(v, message=v.message + share, attainment_pct=got)


def _decide(net: NetworkFloor, single: SingleRequest, sweep: Sweep, params: BudgetParams) -> Verdict:
    budget = budget_for(net, params)
    if not single.ok:
        what = single.error_kind or single.status
        detail = f": {single.error}" if single.error else ""
        return Verdict("failed", f"the URL failed ({what}){detail}", _failed_advice(single, net),
                       budget=budget)
    if budget is None:
        return Verdict("failed", f"no network floor to {net.host}: {net.error or 'nothing answered'}",
                       "the budget needs a round-trip time: allow ICMP or TCP to the host")
    calls = f" × {params.calls} calls" if params.calls > 1 else ""
    network = (f"{_ms(budget.network_ms)} network ({_ms(budget.network_floor_ms)} × "
               f"{budget.round_trips} round trips{calls}) + {_ms(budget.jitter_margin_ms)} jitter margin")
    levels = check_levels(single, sweep, budget.gpu_budget_ms, params)

    # (a) the route alone
    if budget.gpu_budget_ms <= 0:
        advice = "a closer region or a better line (CN2 GIA, CMI, 9929), keep-alive connections"
        if not params.keepalive:
            warm = budget.network_floor_ms * params.calls + budget.jitter_margin_ms
            if warm < params.ttft_ms:
                advice += f" (one round trip per call: would leave {_ms(params.ttft_ms - warm)})"
        return Verdict("network", f"network: the route alone spends the budget: {network} ≥ "
                       f"{params.ttft_ms:g} ms TTFT", advice, budget=budget, levels=levels)
    # (b) one request is already too slow on the server
    assert single.server_ms is not None   # an ok stream has headers and a first event
    if single.server_ms * params.calls > budget.gpu_budget_ms:
        share = _ms(single.server_ms) + (f" × {params.calls} calls" if params.calls > 1 else "")
        return Verdict("gpu", f"model/framework: one request's prefill/first token takes {share} on the "
                       f"server, over the {_ms(budget.gpu_budget_ms)} GPU budget "
                       f"({params.ttft_ms:g} ms TTFT − {_ms(budget.network_ms)} network − "
                       f"{_ms(budget.jitter_margin_ms)} jitter margin)",
                       "a smaller or quantised model, a faster framework (vLLM, SGLang, TensorRT-LLM), "
                       "prompt caching, shorter prompts", budget=budget, levels=levels)
    # (c) queueing: the first level whose TTFT (or errors) breaks the budget
    by_level = {lv.concurrency: lv for lv in sweep.levels}
    broke = next((c for c in levels if c.why in ("errors", "ttft")), None)
    if broke is not None:
        lv: SweepLevel = by_level[broke.concurrency]
        if broke.why == "errors":
            kinds = ", ".join(f"{k} {n}" for k, n in sorted(lv.error_kinds.items()))
            what = f"{lv.errors} of {lv.concurrency} streams failed ({kinds})"
        else:
            assert lv.ttft_p95_ms is not None and broke.server_est_ms is not None
            what = (f"TTFT P95 {_ms(lv.ttft_p95_ms)} puts the server's share at ~{_ms(broke.server_est_ms)}, "
                    f"over the {_ms(budget.gpu_budget_ms)} GPU budget")
        return Verdict("capacity", f"capacity: TTFT climbs with concurrency (queueing): at {lv.concurrency} "
                       f"concurrent streams {what}, while one request fits ({_ms(single.server_ms)})",
                       "more replicas, or a lower max batch / concurrency limit per replica",
                       level=lv.concurrency, budget=budget, levels=levels)
    # (d) streaming speed
    if params.tpot_ms is not None:
        if tpot_check(single.tpot_ms, single.gap_p95_ms, single.stalls_per_min, params.tpot_ms) is False:
            seen_ms = (("TPOT", single.tpot_ms), ("gap P95", single.gap_p95_ms))
            parts = [f"{name} {_ms(v)}" for name, v in seen_ms if v is not None and v > params.tpot_ms]
            if single.stalls:
                parts.append(f"{single.stalls} stall{'s' * (single.stalls > 1)} "
                             f"({_ms(single.stall_ms_total)} in all)")
            advice = ("stalls point at loss on the route or a buffering proxy; a slow TPOT at the model "
                      "(smaller model, speculative decoding, a smaller batch)")
            return Verdict("tpot", f"streaming: per-token output too slow or stalling: {', '.join(parts)} "
                           f"against a {params.tpot_ms:g} ms target", advice, budget=budget, levels=levels)
        slow = next((c for c in levels if c.why == "tpot"), None)
        if slow is not None:
            tp95 = by_level[slow.concurrency].tpot_p95_ms
            assert tp95 is not None
            return Verdict("tpot", f"streaming: TPOT P95 {_ms(tp95)} at {slow.concurrency} concurrent "
                           f"streams, over the {params.tpot_ms:g} ms target (decode slows as batches grow)",
                           "more replicas, or a lower max batch per replica", level=slow.concurrency,
                           budget=budget, levels=levels)
    top = max((c.concurrency for c in levels), default=None)
    upto = f", up to {top} concurrent streams fit" if top is not None else ""
    return Verdict(None, f"within budget: {network} leaves {_ms(budget.gpu_budget_ms)} for the GPU; one "
                   f"request's server share is {_ms(single.server_ms)}{upto}", budget=budget, levels=levels)
