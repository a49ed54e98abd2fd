"""netprobe's `alertmanager` notifier against a real Alertmanager, driven by the collector's own alert
scheduler: rounds ingested over HTTP make a loss rule fire, then clear; Alertmanager's API v2 shows the
firing alert with netprobe's labels and annotations, and no longer lists it once resolved. Windows of 5 s
evaluated 1 s after they close (`[collector] alert_settle`) keep the test short."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from netprobe.alerts.engine import AlertEngine, align_down
from netprobe.collector.server import Collector
from netprobe.collector.tokens import Tokens
from netprobe.config.collector import parse_collector_config
from netprobe.times import utc_now
from tests.support.alertmanager import alertmanager
from tests.support.servers import get_json
from tests.support.store import AGENT, TARGET, icmp_envelope

WINDOW = 5
SETTLE = 1
RULES = """
[[alerts]]
name = "it_loss"
metric = "loss_pct"
threshold = 50
clear_threshold = 10
window = "{window}s"
severity = "critical"
notify = ["am"]

[[notifiers]]
name = "am"
kind = "alertmanager"
url = "{url}"
timeout = "2s"
"""


@pytest.fixture(scope="module")
def am(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with alertmanager(tmp_path_factory.mktemp("am")) as url:
        yield url


def _ours(am: str) -> list[dict[str, Any]]:
    alerts: list[dict[str, Any]] = get_json(am, "/api/v2/alerts", filter='alertname="it_loss"')
    return alerts


async def _until(cond: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not await asyncio.to_thread(cond):
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.1)


async def _post(session: aiohttp.ClientSession, url: str, token: str, rounds: list[dict[str, Any]]) -> None:
    async with session.post(f"{url}/api/v1/results", data=json.dumps(rounds),
                            headers={"Authorization": f"Bearer {token}",
                                     "Content-Type": "application/json"}) as resp:
        assert resp.status == 200, await resp.text()


def _rounds(start: datetime, samples: list[float | None], tag: str) -> list[dict[str, Any]]:
    return [icmp_envelope(start + timedelta(seconds=1 + 2 * i), samples, result_id=f"it-{tag}-{i}")
            for i in range(4)]


def _rounds(start: datetime, samples: list[float | None], tag: str) -> list[dict[str, Any]]:
    return [icmp_envelope(start + timedelta(seconds=0.5 + i), samples, result_id=f"it-{tag}-{i}")
            for i in range(4)]


async def _next_window(engine: AlertEngine) -> datetime:
    """Start of the next window, once the scheduler is past the one before (so rounds land in it whole)."""
    await _until(lambda: engine.stats.passes >= 1, 5)
    start = align_down(utc_now(), WINDOW) + timedelta(seconds=WINDOW)
    await asyncio.sleep(max(0.0, (start - utc_now()).total_seconds()))
    return start


async def test_a_firing_alert_reaches_alertmanager_and_its_clear_resolves_it(am: str, tmp_path: Path) -> None:
    rules = RULES.format(window=WINDOW, url=am)
    cfg = parse_collector_config(f'[collector]\nlisten = "127.0.0.1:0"\nalert_settle = "{SETTLE}s"\n'
                                 f'[storage]\nurl = "sqlite:///{tmp_path / "c.db"}"\n{rules}')
    collector = Collector(cfg)
    await collector.start()
    try:
        assert collector.store is not None and collector.alerts is not None
        engine = collector.alerts.engine
        assert isinstance(engine, AlertEngine)
        token, _ = await Tokens(collector.store).issue(AGENT["id"])
        width = timedelta(seconds=WINDOW)
        async with aiohttp.ClientSession() as session:
            # a window of rounds losing two echoes of three: the rule fires when the scheduler gets to it
            first = await _next_window(engine)
            await _post(session, collector.url, token, _rounds(first, [20.0, None, None], "bad"))
            await _until(lambda: bool(_ours(am)), WINDOW + SETTLE + 10)
            [alert] = _ours(am)
            assert alert["labels"] == {"alertname": "it_loss", "agent": AGENT["id"], "target": TARGET["id"],
                                       "metric": "loss_pct", "severity": "critical", "source": "netprobe"}
            notes = alert["annotations"]
            assert notes["value"] == "66.667" and notes["threshold"] == "50"
            assert notes["summary"].startswith("[FIRING] it_loss: loss_pct 66.667 %")
            assert "raise: > 50" in notes["description"]
            assert alert["status"]["state"] == "active"
            assert datetime.fromisoformat(alert["startsAt"].replace("Z", "+00:00")) == first
            # a later window's rounds all answered: the alert clears, and Alertmanager resolves it
            second = await _next_window(engine)
            await _post(session, collector.url, token, _rounds(second, [20.0, 21.0, 22.0], "good"))
            await _until(lambda: not _ours(am), WINDOW + SETTLE + 10)
            assert second + width < utc_now()
        sent = collector.alerts.dispatcher.stats()["am"]
        # the firing alert, its clear, and any repeat that kept it alive in Alertmanager in between
        assert sent["sent"] >= 2 and sent["failed"] == 0
    finally:
        await collector.stop()
