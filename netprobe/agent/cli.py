"""`netprobe agent run --config FILE`."""

from __future__ import annotations

from pathlib import Path

import typer

from netprobe.agent.run import run_agent

app = typer.Typer(no_args_is_help=True)


@app.command("run")
def run(
    config: Path = typer.Option(..., "--config", "-c", help="agent configuration (TOML)"),
    duration: float | None = typer.Option(None, "--duration", min=0.1,
                                          help="stop after this many seconds (demos, quick start)"),
    summary: bool = typer.Option(False, "--summary", help="on exit, print what this run measured"),
) -> None:
    """Probe every configured target on schedule and store the rounds (SIGTERM drains and flushes)."""
    raise typer.Exit(run_agent(config, duration, summary))
