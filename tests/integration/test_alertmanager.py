"""netprobe's `alertmanager` notifier against a real Alertmanager, driven by the collector's alert engine:
rounds ingested over HTTP make a loss rule fire, then clear; Alertmanager's API v2 shows the firing alert
with netprobe's labels and annotations, and no longer lists it once resolved.

The collector evaluates a window 60 s after it closes (ALERTS_SETTLE); the test has the engine evaluate
the windows its rounds fall in at the instants the scheduler would (window end + settle) instead of
waiting a minute and a half for them."""

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
from netprobe.collector.server import ALERTS_SETTLE, Collector
from netprobe.collector.tokens import Tokens
from netprobe.config.collector import parse_collector_config
from netprobe.times import utc_now
from tests.support.alertmanager import alertmanager
from tests.support.servers import get_json
from tests.support.store import AGENT, TARGET, icmp_envelope

WINDOW = 10
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


async def test_a_firing_alert_reaches_alertmanager_and_its_clear_resolves_it(am: str, tmp_path: Path) -> None:
    rules = RULES.format(window=WINDOW, url=am)
    cfg = parse_collector_config(f'[collector]\nlisten = "127.0.0.1:0"\n[storage]\n'
                                 f'url = "sqlite:///{tmp_path / "c.db"}"\n{rules}')
    collector = Collector(cfg)
    await collector.start()
    try:
        assert collector.store is not None and collector.alerts is not None
        engine = collector.alerts.engine
        assert isinstance(engine, AlertEngine)
        token, _ = await Tokens(collector.store).issue(AGENT["id"])
        # the scheduler's first pass marks where evaluation begins: the window that closes next
        await _until(lambda: engine.stats.passes >= 1, 5)
        first = align_down(utc_now() - timedelta(seconds=ALERTS_SETTLE), WINDOW)
        settle = timedelta(seconds=ALERTS_SETTLE)
        width = timedelta(seconds=WINDOW)
        async with aiohttp.ClientSession() as session:
            # a window of rounds losing two echoes of three: the rule fires
            await _post(session, collector.url, token, _rounds(first, [20.0, None, None], "bad"))
            fired = await engine.evaluate_due(first + width + settle)
            assert [n.state for n in fired] == ["firing"] and fired[0].value == pytest.approx(200 / 3)
            await _until(lambda: bool(_ours(am)), 10)
            [alert] = _ours(am)
            assert alert["labels"] == {"alertname": "it_loss", "agent": AGENT["id"], "target": TARGET["id"],
                                       "metric": "loss_pct", "severity": "critical", "source": "netprobe"}
            notes = alert["annotations"]
            assert notes["value"] == "66.667" and notes["threshold"] == "50"
            assert notes["summary"].startswith("[FIRING] it_loss: loss_pct 66.667 %")
            assert "raise: > 50" in notes["description"]
            assert alert["status"]["state"] == "active"
            assert datetime.fromisoformat(alert["startsAt"].replace("Z", "+00:00")) == first
            # the next window's rounds all answered: the alert clears, and Alertmanager resolves it
            await _post(session, collector.url, token, _rounds(first + width, [20.0, 21.0, 22.0], "good"))
            cleared = await engine.evaluate_due(first + 2 * width + settle)
            assert [(n.state, n.value) for n in cleared] == [("resolved", 0.0)]
            assert cleared[0].ended_at == first + 2 * width < utc_now()    # Alertmanager's endsAt: past
            await _until(lambda: not _ours(am), 10)
        sent = collector.alerts.dispatcher.stats()["am"]
        assert sent["sent"] == 2 and sent["failed"] == 0
    finally:
        await collector.stop()
