"""The budget as a table for people (`netprobe budget`, and the demo's budget step)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from netprobe.textout import Out, TextTable

if TYPE_CHECKING:
    from netprobe.budget.compute import BudgetParams, BudgetRow
    from netprobe.report.slo import SloRequest


def ms(v: float | None) -> str:
    return "–" if v is None else f"{v:.0f}"


def pct(v: float | None) -> str:
    return "–" if v is None else f"{v:.1f}"


def print_slo(rows: list[BudgetRow], slo: SloRequest, con: Out | None = None) -> None:
    """Attainment (docs/numbers.md): per candidate, the share of requests within the SLO at the peak and
    off-peak, the end-to-end TTFT, and the server time that keeps X % within it."""
    m = slo.model
    title = (f"SLO: first token within {m.ttft_ms:g} ms · {m.round_trips} round trip"
             f"{'s' * (m.round_trips > 1)} · {m.calls} call{'s' * (m.calls > 1)} in series · "
             f"share of requests, % (loss and retransmission timeouts included)")
    table = TextTable(title=title)
    for col in ("region", "rank", "target", "line", "peak %", "off-peak %", "e2e p50", "e2e p95", "e2e p99",
                f"GPU P{m.pct:g} for {m.pct:g} %", "server", "worst hour"):
        table.add_column(col, justify="left" if col in ("region", "target", "line", "server") else "right")
    for r in rows:
        s = r.slo
        if s is None:
            continue
        e2e = s.outcome.e2e_ttft_ms if s.outcome else {}
        budget = s.outcome.gpu_budget_at_pct_ms if s.outcome else None
        worst = min(((v, h) for h, v in enumerate(s.hours) if v is not None), default=None)
        got = r.attainment_pct
        ok = got is not None and got >= m.pct
        table.add_row(r.region, str(r.rank), r.target, r.line, pct(got), pct(s.offpeak_attainment_pct),
                      ms(e2e.get("p50")), ms(e2e.get("p95")), ms(e2e.get("p99")),
                      "network over" if budget is None else ms(budget), s.server,
                      "–" if worst is None else f"{worst[1]:02d}:00 {worst[0]:.1f}",
                      cell_styles=(None, None, None, None, "green" if ok else "red", *(None,) * 7))
    (con or Out()).table(table)


def print_budget(rows: list[BudgetRow], p: BudgetParams, con: Out | None = None,
                 worst_case: bool = False) -> None:
    connection = ("keep-alive (1 round trip)" if p.keepalive else
                  f"new TCP + TLS {p.tls} connection ({p.round_trips} round trips)")
    title = f"TTFT {p.ttft_ms:g} ms · {connection} · {p.calls} call{'s' * (p.calls > 1)} in series"
    if worst_case:
        title = "Worst case, P95s added: " + title
    table = TextTable(title=title)
    text_columns = ("region", "target", "line", "verdict")
    for col in ("region", "rank", "target", "line", "floor p95", "network", "jitter",
                "GPU: queue+prefill+1st", "per token", "verdict"):
        table.add_column(col, justify="left" if col in text_columns else "right")
    plain = (None,) * 9
    for r in rows:
        gpu = ms(r.gpu_budget_ms) + (f" (measured {ms(r.gpu_measured_ms)})" if r.gpu_measured_ms else "")
        tpot = "–" if r.tpot_target_ms is None else \
            f"≤ {r.tpot_target_ms:g}: " + {True: "ok", False: "over", None: "no data"}[r.tpot_ok]
        verdict = "feasible" if r.feasible else f"over: {r.why}"
        table.add_row(r.region, str(r.rank), r.target, r.line, ms(r.network_floor_ms), ms(r.network_ms),
                      ms(r.jitter_margin_ms), gpu, tpot, verdict,
                      cell_styles=(*plain, "green" if r.feasible else "red"))
    con = con or Out()
    con.table(table)
    if not rows:
        con.print("no peak-window RTT in the chosen days: nothing to budget")
