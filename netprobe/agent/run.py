"""`netprobe agent run`'s body, apart from its click command: the daemon imports what it needs lazily."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from netprobe.agent.daemon import Agent


def run_agent(config: Path, duration: float | None, summary: bool) -> int:
    """Probe every configured target on schedule and store the rounds; the exit code."""
    from netprobe.agent.daemon import Agent  # lazily: keeps every other command's start-up light
    from netprobe.config.agent import load_config
    from netprobe.logs import setup_logging

    cfg = load_config(config)
    setup_logging(cfg.log.level, cfg.log.format)
    agent = Agent(config, cfg, duration=duration)
    return asyncio.run(_run(agent, summary))


async def _run(agent: Agent, summary: bool) -> int:
    from netprobe.times import utc_now

    started = utc_now()
    code = await agent.run()
    if summary:
        from netprobe.agent.summary import print_summary  # only for --summary

        await print_summary(agent.config, started, agent.db_url)
    return code
