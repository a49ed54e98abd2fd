"""`netprobe budget --db URL --ttft-ms N [--tpot-ms N] [--tls 1.2|1.3] [--keepalive] [--calls N] [--json]`,
and its subcommands (`budget vram`). A group whose callback is the budget itself when no subcommand
follows, so `netprobe budget --ttft-ms …` keeps its words."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Annotated

import typer

from netprobe.errors import UsageError

if TYPE_CHECKING:

    from netprobe.report.rows import PeakRow


app = typer.Typer(add_completion=False)


@app.callback(invoke_without_command=True)
def budget(
    ctx: typer.Context,
    ttft_ms: Annotated[float | None, typer.Option("--ttft-ms", metavar="N",
                                                  help="time-to-first-token target, ms")] = None,
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
    if ctx.invoked_subcommand is not None:
        return
    if ttft_ms is None:
        raise UsageError("--ttft-ms: required (the time-to-first-token target, ms)")
    from netprobe.budget.compute import budget_params, budget_rows, candidate
    from netprobe.budget.table import print_budget

    params = budget_params(ttft_ms, tpot_ms, tls, keepalive, calls)
    peak = asyncio.run(_peak(db, days, window, region))
    rows = budget_rows([c for c in map(candidate, peak) if c is not None], params)
    if json_out:
        print(json.dumps({"ttft_ms": ttft_ms, "tpot_ms": tpot_ms, "tls": tls, "keepalive": keepalive,
                          "calls": calls, "window": window, "days": days,
                          "rows": [r.to_dict() for r in rows]}))
        return
    print_budget(rows, params)


async def _peak(db: str | None, days: int, window: str, region: str | None) -> list[PeakRow]:
    from netprobe.report.peak import peak_rows
    from netprobe.report.windows import HourWindow
    from netprobe.store.reads import open_source

    win = HourWindow.parse(window, "--window")
    if days < 1:
        raise UsageError(f"--days: must be at least 1, got {days}")
    store = await open_source(db)     # plain SQL, without SQLAlchemy, on a database at the head revision
    try:
        return await peak_rows(store, days, win, region=region, peak_only=True)
    finally:
        await store.close()


