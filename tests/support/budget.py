"""One case of the attainment model (netprobe.budget.attainment takes a batch), for its tests."""

from __future__ import annotations

from netprobe.budget.attainment import Dist, Outcome, Rtts, Server, SloModel, outcomes


def outcome(rtt: Dist, loss: float, server: Server, m: SloModel) -> Outcome:
    return outcomes(Rtts.of([rtt]), [loss], [server], m)[0]


def gpu_budget_at(rtt: Dist, loss: float, server: Server, m: SloModel) -> float | None:
    return outcome(rtt, loss, server, m).gpu_budget_at_pct_ms
