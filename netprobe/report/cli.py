"""`netprobe report peak --db URL [--days N] [--agent ID] [--region R] [--window 20-23] [--offpeak 3-6]
[--format table|json|md|html] [--out FILE] [--slo-ttft-ms N]`."""

from __future__ import annotations

from pathlib import Path

import click

from netprobe.textout import Group

# The store stack is imported inside the command (report/run.py): `netprobe --help` should not pay for it.

app = Group("report", help="Reports from the hourly rollups (evening peak).", no_args_is_help=True)


@app.command("peak")
@click.option("--db", metavar="URL", help="sqlite:///PATH or postgresql://USER@HOST/DB (default: the agent's "
              "SQLite file under its state directory)")
@click.option("--days", metavar="N", type=int, default=7, show_default=True,
              help="local calendar days, today included")
@click.option("--agent", metavar="ID", help="only this agent")
@click.option("--region", metavar="R", help="only agents of this region")
@click.option("--window", metavar="START-END", default="20-23", show_default=True,
              help="peak window, local hours, half-open (22-2 crosses midnight)")
@click.option("--offpeak", metavar="START-END", default="3-6", show_default=True,
              help="off-peak window to compare with")
@click.option("--format", "fmt", metavar="table|json|md|html", default="table", show_default=True)
@click.option("--out", metavar="FILE", type=click.Path(path_type=Path), help="write here instead of stdout")
@click.option("--slo-ttft-ms", metavar="N", type=float, default=1000.0, show_default=True,
              help="attainment: the share of requests (new TLS 1.3 connection, server as openai-mode streams "
              "measured it, else none) with the first token within N ms")
def peak(db: str | None, days: int, agent: str | None, region: str | None, window: str, offpeak: str,
         fmt: str, out: Path | None, slo_ttft_ms: float) -> None:
    """Evening peak vs off-peak per agent × target, in each agent's own time zone."""
    from netprobe.report.run import peak as run_peak

    run_peak(db, days, agent, region, window, offpeak, fmt, out, slo_ttft_ms)
