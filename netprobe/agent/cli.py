"""`netprobe agent run --config FILE`."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from netprobe.agent.daemon import Agent

app = typer.Typer(no_args_is_help=True)


@app.command("run")
def run(
    config: Path = typer.Option(..., "--config", "-c", help="agent configuration (TOML)"),
    duration: float | None = typer.Option(None, "--duration", min=0.1,
                                          help="stop after this many seconds (demos, quick start)"),
    summary: bool = typer.Option(False, "--summary", help="on exit, print what this run measured"),
) -> None:
    """Probe every configured target on schedule and store the rounds (SIGTERM drains and flushes)."""
    from netprobe.agent.daemon import Agent  # lazily: keeps every other command's start-up light
    from netprobe.config.agent import load_config
    from netprobe.logs import setup_logging

    cfg = load_config(config)
    setup_logging(cfg.log.level, cfg.log.format)
    agent = Agent(config, cfg, duration=duration)
    code = asyncio.run(_run(agent, summary))
    raise typer.Exit(code)


async def _run(agent: Agent, summary: bool) -> int:
    from netprobe.times import utc_now

    started = utc_now()
    code = await agent.run()
    if summary:
        from netprobe.agent.summary import print_summary  # rich: only for --summary

        await print_summary(agent.config, started, agent.db_url)
    return code
