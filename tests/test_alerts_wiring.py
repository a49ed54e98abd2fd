"""Alerts inside the running services: the agent and the collector start the evaluator and stop it
within their shutdown budgets (the rules themselves are tested in test_alerts_engine.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from netprobe.collector.config import parse_collector_config
from netprobe.collector.server import Collector

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
    from test_agent import PORT, Daemon, _write

    db, cfg = tmp_path / "a.db", tmp_path / "agent.toml"
    _write(cfg, db, PORT, ALERTS)
    code, stop_s, err = Daemon(cfg).stop()
    assert code == 0, err
    assert stop_s < 5.0
    assert "alerts started" in err and "Traceback" not in err


async def test_collector_runs_alerts_and_stops(tmp_path: Path) -> None:
    cfg = parse_collector_config(f'[collector]\nlisten = "127.0.0.1:0"\n[storage]\n'
                                 f'url = "sqlite:///{tmp_path / "c.db"}"\n' + ALERTS)
    collector = Collector(cfg)
    await collector.start()
    try:
        assert collector.alerts is not None and collector.alerts.engine is not None
        assert [r.name for r in collector.alerts.engine.rules] == ["loss"]
        assert set(collector.alerts.dispatcher.stats()) == {"log", "hook"}
    finally:
        await collector.stop()
