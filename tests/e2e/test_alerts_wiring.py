"""Alerts inside the running services: the agent and the collector start the evaluator and stop it
within their shutdown budgets (the rules themselves are tested in test_alerts_engine.py)."""

from __future__ import annotations

import os
from pathlib import Path

import aiohttp
import pytest

from netprobe.collector.server import Collector
from netprobe.config.collector import parse_collector_config

ALERTS = """
[[alerts]]
name = "loss"
metric = "loss_pct"
threshold = 1.0
window = "10s"
notify = ["log", "hook"]
[[notifiers]]
name = "log"
kind = "log"
[[notifiers]]
name = "hook"
kind = "webhook"
url = "http://127.0.0.1:9/hook"
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="raw ICMP sockets need root")
def test_agent_runs_alerts_and_still_stops_within_5s(tmp_path: Path) -> None:
    from tests.support.agent import PORT, Daemon, _scrape, _write

    db, cfg = tmp_path / "a.db", tmp_path / "agent.toml"
    _write(cfg, db, PORT, '[metrics]\nlisten = "127.0.0.1:19471"\n' + ALERTS)
    agent = Daemon(cfg)
    try:
        samples = _scrape(agent.proc.pid, 19471)
    finally:
        code, stop_s, err = agent.stop()
    assert code == 0, err
    assert stop_s < 5.0
    assert "alerts started" in err and "Traceback" not in err
    assert samples[("netprobe_alerts_firing", ())] == 0
    assert ("netprobe_alert_notifications_total", (("notifier", "hook"), ("outcome", "failed"))) in samples


async def test_collector_runs_alerts_and_stops(tmp_path: Path) -> None:
    cfg = parse_collector_config(f'[collector]\nlisten = "127.0.0.1:0"\n[storage]\n'
                                 f'url = "sqlite:///{tmp_path / "c.db"}"\n' + ALERTS)
    collector = Collector(cfg)
    await collector.start()
    try:
        assert collector.alerts is not None and collector.alerts.engine is not None
        assert [r.name for r in collector.alerts.engine.rules] == ["loss"]
        assert set(collector.alerts.dispatcher.stats()) == {"log", "hook"}
        async with aiohttp.ClientSession() as session, session.get(collector.url + "/metrics") as resp:
            text = await resp.text()
        assert "netprobe_alerts_firing 0.0" in text
        assert 'netprobe_alert_notifications_total{notifier="hook",outcome="sent"} 0.0' in text
        assert 'netprobe_alert_transitions_total{state="firing"} 0.0' in text
    finally:
        await collector.stop()
