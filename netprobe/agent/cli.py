"""`netprobe agent run --config FILE`."""

from __future__ import annotations

from pathlib import Path

import click

from netprobe.agent.run import run_agent

app = click.Group("agent", help="Run the scheduled agent.")


@app.command("run")
@click.option("--config", "-c", type=click.Path(path_type=Path), required=True,
              help="agent configuration (TOML)")
@click.option("--duration", type=click.FloatRange(min=0.1), default=None,
              help="stop after this many seconds (demos, quick start)")
@click.option("--summary", is_flag=True, default=False, help="on exit, print what this run measured")
def run(config: Path, duration: float | None, summary: bool) -> None:
    """Probe every configured target on schedule and store the rounds (SIGTERM drains and flushes)."""
    raise click.exceptions.Exit(run_agent(config, duration, summary))
