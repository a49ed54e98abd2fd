"""`netprobe report peak --db URL [--days N] [--agent ID] [--region R] [--window 20-23] [--offpeak 3-6]
[--format table|json|md|html] [--out FILE] [--slo-ttft-ms N]`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

# The store stack is imported inside the command: `netprobe --help` should not pay for it. A plain
# `report peak …` does not come here at all (netprobe.cli, report/run.py).

app = typer.Typer(no_args_is_help=True, add_completion=False)


@app.callback()
def _group() -> None:
    """Reports computed from the hourly rollups."""


@app.command()
def peak(
    db: Annotated[str | None, typer.Option(
        "--db", metavar="URL", help="sqlite:///PATH or postgresql://USER@HOST/DB (default: the agent's "
        "SQLite file under its state directory)")] = None,
    days: Annotated[int, typer.Option("--days", metavar="N", help="local calendar days, today included")] = 7,
    agent: Annotated[str | None, typer.Option("--agent", metavar="ID", help="only this agent")] = None,
    region: Annotated[str | None, typer.Option("--region", metavar="R",
                                               help="only agents of this region")] = None,
    window: Annotated[str, typer.Option(
        "--window", metavar="START-END",
        help="peak window, local hours, half-open (22-2 crosses midnight)")] = "20-23",
    offpeak: Annotated[str, typer.Option("--offpeak", metavar="START-END",
                                         help="off-peak window to compare with")] = "3-6",
    fmt: Annotated[str, typer.Option("--format", metavar="table|json|md|html")] = "table",
    out: Annotated[Path | None, typer.Option("--out", metavar="FILE",
                                             help="write here instead of stdout")] = None,
    slo_ttft_ms: Annotated[float, typer.Option(
        "--slo-ttft-ms", metavar="N", help="attainment: the share of requests (new TLS 1.3 connection, "
        "server as openai-mode streams measured it, else none) with the first token within N ms")] = 1000.0,
) -> None:
    """Evening peak vs off-peak per agent × target, in each agent's own time zone."""
    from netprobe.report.run import peak as run_peak  # also netprobe.cli's way without typer

    run_peak(db, days, agent, region, window, offpeak, fmt, out, slo_ttft_ms)
