"""`netprobe budget --db URL --ttft-ms N [--tpot-ms N] [--tls 1.2|1.3] [--keepalive] [--calls N] [--json]`,
and its subcommands (`budget vram`). A group whose callback is the budget itself when no subcommand
follows, so `netprobe budget --ttft-ms …` keeps its words."""

from __future__ import annotations

from typing import Annotated

import typer

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
    from netprobe.budget.run import budget as run_budget  # also netprobe.cli's way without typer

    run_budget(ttft_ms, db, tpot_ms, tls, keepalive, calls, days, window, region, json_out)
