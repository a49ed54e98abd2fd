"""`netprobe agent run --config FILE`: the daemon imports what it needs lazily."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from netprobe.agent.daemon import Agent

app = click.Group("agent", help="Run the scheduled agent.")


@app.command("run")
@click.option("--config", "-c", type=click.Path(path_type=Path), required=True,
              help="agent configuration (TOML)")
@click.option("--duration", type=click.FloatRange(min=0.1), default=None,
              help="stop after this many seconds (demos, quick start)")
@click.option("--summary", is_flag=True, default=False, help="on exit, print what this run measured")
def run(config: Path, duration: float | None, summary: bool) -> None:
    """Probe every configured target on schedule and store the rounds (SIGTERM drains and flushes)."""
    from netprobe.agent.daemon import Agent  # lazily: keeps every other command's start-up light
    from netprobe.config.agent import load_config
    from netprobe.logs import setup_logging

    cfg = load_config(config)
    setup_logging(cfg.log.level, cfg.log.format)
    agent = Agent(config, cfg, duration=duration)
    raise click.exceptions.Exit(asyncio.run(_run(agent, summary)))


async def _run(agent: Agent, summary: bool) -> int:
    from netprobe.times import utc_now

    started = utc_now()
    code = await agent.run()
    if summary:
        from netprobe.agent.summary import print_summary  # only for --summary

        await print_summary(agent.config, started, agent.db_url)
    return code
