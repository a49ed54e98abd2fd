"""The three steps in order, then the verdict; one Diagnosis record for the renderers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from netprobe.budget.compute import BudgetParams
from netprobe.probes.sse.runtime import SseSettings

from .steps import (
    LiveSettings,
    NetworkFloor,
    SingleRequest,
    Sweep,
    concurrency_sweep,
    live_floor,
    single_request,
    stored_floor,
)
from .verdict import Verdict, decide

Step = NetworkFloor | SingleRequest | Sweep


@dataclass(frozen=True, slots=True)
class Diagnosis:
    url: str
    mode: str
    params: BudgetParams
    network: NetworkFloor
    single: SingleRequest
    sweep: Sweep
    verdict: Verdict

    def to_dict(self) -> dict[str, Any]:
        checks = {c.concurrency: c for c in self.verdict.levels}
        levels = []
        for lv in self.sweep.levels:
            check = checks.get(lv.concurrency)
            levels.append({"concurrency": lv.concurrency,
                           "ttft_ms": {"p50": lv.ttft_p50_ms, "p95": lv.ttft_p95_ms},
                           "tpot_ms": {"p50": lv.tpot_p50_ms, "p95": lv.tpot_p95_ms},
                           "errors": lv.errors, "error_kinds": dict(lv.error_kinds),
                           "server_est_ms": check.server_est_ms if check else None,
                           "over_budget": check.over if check else None})
        b, p = self.verdict.budget, self.params
        budget = None if b is None else {
            "ttft_ms": p.ttft_ms, "tpot_ms": p.tpot_ms, "tls": p.tls, "keepalive": p.keepalive,
            "network_floor_ms": b.network_floor_ms, "round_trips": b.round_trips, "calls": b.calls,
            "network_ms": b.network_ms, "jitter_margin_ms": b.jitter_margin_ms,
            "jitter_source": b.jitter_source, "gpu_budget_ms": b.gpu_budget_ms}
        return {"url": self.url, "mode": self.mode, "network": self.network.to_dict(),
                "single": self.single.to_dict(), "sweep": {"levels": levels, "skipped": self.sweep.skipped},
                "budget": budget, "verdict": self.verdict.to_dict()}


async def network_step(url: str, db: str | None, days: int, window: str,
                       live: LiveSettings = LiveSettings()) -> NetworkFloor:
    stored, why_not = await stored_floor(url, db, days, window)
    if stored is not None:
        return stored
    net = await live_floor(url, live)
    # say why the stored data was not used, unless there simply is no agent database here
    if db is not None or not why_not.startswith("no agent database"):
        net = replace(net, notes=(f"no stored data used: {why_not}", *net.notes))
    return net


async def diagnose(url: str, settings: SseSettings, params: BudgetParams, levels: list[int], *,
                   db: str | None = None, days: int = 7, window: str = "20-23",
                   live: LiveSettings = LiveSettings(),
                   show: Callable[[Step], None] | None = None) -> Diagnosis:
    """Network floor, one request, the sweep (skipped when the request failed), then the verdict.
    `show` gets each step's record as soon as it is measured (the terminal prints sections as they come)."""
    shown = show if show is not None else (lambda _step: None)
    net = await network_step(url, db, days, window, live)
    shown(net)
    single = await single_request(url, settings)
    shown(single)
    if single.ok:
        sweep = await concurrency_sweep(url, settings, levels)
    else:
        sweep = Sweep(skipped="the single request failed")
    shown(sweep)
    return Diagnosis(url=url, mode=settings.mode, params=params, network=net, single=single, sweep=sweep,
                     verdict=decide(net, single, sweep, params))
