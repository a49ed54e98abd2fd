"""`netprobe agent run`'s body, without typer: netprobe.cli runs a plain `agent run --config FILE`
from here without building the command tree (typer and click: modules a daemon would keep for good).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
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
        from netprobe.agent.summary import print_summary  # rich: only for --summary

        await print_summary(agent.config, started, agent.db_url)
    return code


def plain_args(args: Sequence[str]) -> tuple[Path, float | None, bool] | None:
    """(config, duration, summary) when `args` (what follows `agent run`) are exactly the options the
    typer command takes, each once and valid (--config/-c FILE, --duration S with S ≥ 0.1, --summary);
    None for anything else (--help, an unknown or repeated option, a bad value), which then goes to the
    typer command tree as before, with its messages."""
    config: Path | None = None
    duration: float | None = None
    summary = False
    seen: set[str] = set()
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        if name == "--summary" and not eq:
            key = "summary"
        elif name in ("--config", "-c", "--duration"):
            key = "duration" if name == "--duration" else "config"
            if not eq:
                if i + 1 >= len(args):
                    return None
                i += 1
                value = args[i]
        else:
            return None
        if key in seen:
            return None
        seen.add(key)
        if key == "summary":
            summary = True
        elif key == "config":
            if not value or value.startswith("-"):
                return None
            config = Path(value)
        else:
            try:
                duration = float(value)
            except ValueError:
                return None
            if not (math.isfinite(duration) and duration >= 0.1):
                return None
        i += 1
    if config is None:
        return None
    return config, duration, summary
