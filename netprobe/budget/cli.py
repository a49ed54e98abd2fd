"""`netprobe budget --db URL --ttft-ms N [--tpot-ms N] [--tls 1.2|1.3] [--keepalive] [--calls N] [--json]`."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Annotated

import typer

from netprobe.errors import UsageError

if TYPE_CHECKING:
    from rich.console import Console

    from netprobe.budget.compute import BudgetParams, BudgetRow, Candidate
    from netprobe.report.peak import PeakRow


def budget(
    ttft_ms: Annotated[float, typer.Option("--ttft-ms", metavar="N",
                                           help="time-to-first-token target, ms")],
    db: Annotated[str | None, typer.Option("--db", metavar="URL",
                                           help="database (default: the agent's SQLite file)")] = None,
    tpot_ms: Annotated[float | None, typer.Option(
        "--tpot-ms", metavar="N", help="time-per-output-token target, checked against peak SSE gaps, "
        "stalls and measured TPOT")] = None,
    tls: Annotated[str, typer.Option("--tls", metavar="1.2|1.3",
                                     help="TLS version of a new connection")] = "1.3",
    keepalive: Annotated[bool, typer.Option("--keepalive",
                                            help="a warm connection: one round trip")] = False,
    calls: Annotated[int, typer.Option("--calls", metavar="N",
                                       help="model calls in series per answer (agent workflows)")] = 1,
    days: Annotated[int, typer.Option("--days", metavar="N", help="local days of data")] = 7,
    window: Annotated[str, typer.Option("--window", metavar="START-END",
                                        help="the peak window, agent-local hours")] = "20-23",
    region: Annotated[str | None, typer.Option("--region", metavar="R", help="only this region")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="one JSON object on stdout")] = False,
) -> None:
    """What a TTFT target leaves the GPU on each candidate route at the evening peak (DESIGN §5)."""
    from netprobe.budget.compute import budget_rows

    params = budget_params(ttft_ms, tpot_ms, tls, keepalive, calls)
    peak = asyncio.run(_peak(db, days, window, region))
    rows = budget_rows([c for c in map(candidate, peak) if c is not None], params)
    if json_out:
        print(json.dumps({"ttft_ms": ttft_ms, "tpot_ms": tpot_ms, "tls": tls, "keepalive": keepalive,
                          "calls": calls, "window": window, "days": days,
                          "rows": [r.to_dict() for r in rows]}))
        return
    print_budget(rows, params)


def budget_params(ttft_ms: float, tpot_ms: float | None, tls: str, keepalive: bool,
                  calls: int) -> BudgetParams:
    """The budget options checked (a UsageError names the bad one); `diagnose` shares them."""
    from netprobe.budget.compute import BudgetParams

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
    from netprobe.budget.compute import Candidate

    p = row.peak
    if p.rtt_p50_ms is None or p.rtt_p95_ms is None:
        return None
    return Candidate(agent=row.agent, region=row.region or "", target=row.target,
                     datacenter=row.datacenter or "", line=row.line or "", rtt_p50_ms=p.rtt_p50_ms,
                     rtt_p95_ms=p.rtt_p95_ms, delay_var_p50_ms=p.sse_delay_var_p50_ms,
                     delay_var_p95_ms=p.sse_delay_var_p95_ms, gap_p95_ms=p.sse_gap_p95_ms,
                     stalls_per_min=p.stalls_per_min, server_first_ms=p.sse_server_first_ms,
                     tpot_ms=p.sse_tpot_ms)


async def _peak(db: str | None, days: int, window: str, region: str | None) -> list[PeakRow]:
    from netprobe.report.peak import peak_rows
    from netprobe.report.windows import HourWindow
    from netprobe.store.store import open_store

    win = HourWindow.parse(window, "--window")
    if days < 1:
        raise UsageError(f"--days: must be at least 1, got {days}")
    store = await open_store(db)
    try:
        return await peak_rows(store, days, win, region=region, peak_only=True)
    finally:
        await store.close()


def _ms(v: float | None) -> str:
    return "–" if v is None else f"{v:.0f}"


def print_budget(rows: list[BudgetRow], p: BudgetParams, con: Console | None = None) -> None:
    from netprobe.render import console
    from netprobe.text_table import TextTable

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
        gpu = _ms(r.gpu_budget_ms) + (f" (measured {_ms(r.gpu_measured_ms)})" if r.gpu_measured_ms else "")
        tpot = "–" if r.tpot_target_ms is None else \
            f"≤ {r.tpot_target_ms:g}: " + {True: "ok", False: "over", None: "no data"}[r.tpot_ok]
        verdict = "feasible" if r.feasible else f"over: {r.why}"
        table.add_row(r.region, str(r.rank), r.target, r.line, _ms(r.network_floor_ms), _ms(r.network_ms),
                      _ms(r.jitter_margin_ms), gpu, tpot, verdict,
                      cell_styles=(*plain, "green" if r.feasible else "red"))
    con = con or console()
    table.print(con)
    if not rows:
        con.print("no peak-window RTT in the chosen days: nothing to budget")
