"""`netprobe alerts test --config FILE`: one test message through every notifier, OK or the error each."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import click

app = click.Group("alerts", help="Alert notifiers: send a test message through each.")


@app.command("test")
@click.option("--config", type=click.Path(path_type=Path), required=True,
              help="agent or collector configuration (TOML)")
def test(config: Path) -> None:
    """Send one test message (a firing alert named netprobe-test) through each configured notifier and
    print OK or the error per notifier; exit 1 if any failed, 2 on a bad configuration."""
    # lazily: pydantic, aiohttp and the config models are slow to import for every `netprobe` command
    from netprobe.alerts.formats import Notification
    from netprobe.alerts.notify import Dispatcher
    from netprobe.config.alerts import AlertRule
    from netprobe.config.loader import is_collector_file
    from netprobe.times import utc_now

    if is_collector_file(config):
        from netprobe.config.collector import load_collector_config

        notifiers, source = load_collector_config(config).notifiers, "collector"
    else:
        from netprobe.config.agent import load_config

        agent_cfg = load_config(config)
        notifiers, source = agent_cfg.notifiers, agent_cfg.agent.id
    if not notifiers:
        click.echo(f"{config}: no [[notifiers]] configured")
        raise click.exceptions.Exit(1)
    now = utc_now()
    rule = AlertRule(name="netprobe-test", metric="loss_pct", op=">", threshold=1.0, clear_threshold=0.5,
                     window=300.0, for_windows=1, notify=tuple(n.name for n in notifiers), severity="info")
    start = now - timedelta(minutes=5)
    note = Notification(rule=rule, agent=source, target="test", state="firing", value=2.0, probe="icmp",
                        started_at=start, ended_at=None, window_start=start, window_end=now,
                        valid_until=now + timedelta(minutes=5))
    outcomes = asyncio.run(Dispatcher(notifiers).send_now(note))
    failed = 0
    for cfg in notifiers:
        outcome = outcomes[cfg.name]
        failed += not outcome.ok
        click.echo(f"{cfg.name} ({cfg.kind}): " + ("OK" if outcome.ok else f"FAILED: {outcome.error}"))
    if failed:
        raise click.exceptions.Exit(1)
