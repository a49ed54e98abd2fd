"""The budget as a table for people (`netprobe budget`, and the demo's budget step)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from netprobe.probes.render import console
from netprobe.report.text_table import TextTable

if TYPE_CHECKING:
    from rich.console import Console

    from netprobe.budget.compute import BudgetParams, BudgetRow


def ms(v: float | None) -> str:
    return "–" if v is None else f"{v:.0f}"


def print_budget(rows: list[BudgetRow], p: BudgetParams, con: Console | None = None) -> None:
    conn = "keep-alive (1 round trip)" if p.keepalive else \
        f"new TCP + TLS {p.tls} connection ({p.round_trips} round trips)"
    title = f"TTFT {p.ttft_ms:g} ms · {conn} · {p.calls} call{'s' * (p.calls > 1)} in series"
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
    con = con or console()
    table.print(con)
    if not rows:
        con.print("no peak-window RTT in the chosen days: nothing to budget")
