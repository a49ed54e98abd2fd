"""Quorum alerts end to end: three agents of one region on the lab upload to a real collector whose
loss rule has quorum = 2, and a real webhook receiver gets what it sends.

The hk route loses 40 % for everyone: a route problem, one quorum alert naming the three agents. The
agent lc reaches tokyo by a path of its own (the route tyo-lm, same datacenter and line) that loses
40 %, while la and lb reach it clean: lc's last mile, one local notification naming only lc and no
quorum alert for tokyo. Agents, collector and receiver all run in the lab's agent namespace."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from netprobe.collector.tokens import Tokens
from netprobe.dashboard.overview import overview_page
from netprobe.dashboard.target import target_page
from netprobe.lab.addressing import AGENT_NS
from netprobe.store import alert_events as history
from netprobe.store import open_store
from netprobe.times import utc_now
from tests.support.alert_routes import RouteAlert, firing_routes
from tests.support.collector import CLI, CollectorProcess, wait_for
from tests.support.lab import LabState, running_lab

pytestmark = pytest.mark.lab

PORT, HOOK_PORT = 18481, 18482
SPEC: dict[str, Any] = {
    "lab": {"seed": 14},
    "routes": [
        {"id": "hk", "datacenter": "hk", "line": "cn2-gia", "forward": {"delay_ms": 5.0, "loss_pct": 40.0},
         "reverse": {"delay_ms": 5.0}},
        {"id": "tyo", "datacenter": "tokyo", "line": "cn2-gia", "rtt_ms": 20.0},
        {"id": "tyo-lm", "datacenter": "tokyo", "line": "cn2-gia",
         "forward": {"delay_ms": 10.0, "loss_pct": 40.0}, "reverse": {"delay_ms": 10.0}},
    ],
}
AGENTS = {"la": "tyo.lab", "lb": "tyo.lab", "lc": "tyo-lm.lab"}     # agent → its way to tokyo
COLLECTOR = """
[collector]
listen = "127.0.0.1:{port}"
alert_settle = "2s"

[storage]
url = "sqlite:///{db}"

[[alerts]]
name = "loss"
metric = "loss_pct"
threshold = 10.0
clear_threshold = 5.0
window = "5s"
for_windows = 2
quorum = 2
scope = "region"
notify = ["hook"]

[[notifiers]]
name = "hook"
kind = "webhook"
url = "http://127.0.0.1:{hook}/hook"
retries = 1
"""
AGENT = """
[agent]
id = "{id}"
region = "cn-east"
isp = "telecom"
timezone = "Asia/Shanghai"

[storage]
url = "sqlite:///{db}"

[probes.icmp]
every = "1s"
count = 10
interval = "0.05s"
timeout = "0.5s"

[[targets]]
id = "hk-cn2"
host = "hk.lab"
datacenter = "hk"
line = "cn2-gia"
probes = ["icmp"]

[[targets]]
id = "tyo-cn2"
host = "{tokyo}"
datacenter = "tokyo"
line = "cn2-gia"
probes = ["icmp"]

[uplink]
url = "http://127.0.0.1:{port}"
token_file = "{token}"
batch = 20
retry_max = "1s"
"""


@pytest.fixture(scope="module")
def lab() -> Iterator[LabState]:
    with running_lab(SPEC) as state:
        yield state


async def issue_tokens(url: str, files: dict[str, Path]) -> None:
    """What `netprobe collector add-agent` does, for the three agents in one process."""
    store = await open_store(url)
    try:
        for agent_id, path in files.items():
            path.write_text((await Tokens(store).issue(agent_id))[0] + "\n")
    finally:
        await store.close()


def received(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_route_problem_is_one_quorum_alert_and_a_last_mile_is_local(lab: LabState, tmp_path: Path) -> None:
    t0 = time.monotonic()
    hook_out = tmp_path / "hook.jsonl"
    hook = subprocess.Popen(["ip", "netns", "exec", AGENT_NS, sys.executable,
                             str(Path(__file__).parents[1] / "support" / "hook.py"), str(HOOK_PORT),
                             str(hook_out)])
    db = tmp_path / "collector.db"
    ccfg = tmp_path / "collector.toml"
    ccfg.write_text(COLLECTOR.format(port=PORT, db=db, hook=HOOK_PORT))
    tokens = {a: tmp_path / f"{a}.token" for a in AGENTS}
    asyncio.run(issue_tokens(f"sqlite:///{db}", tokens))
    collector = CollectorProcess(ccfg, f"http://127.0.0.1:{PORT}", tmp_path / "collector.log", netns=AGENT_NS)
    agents: dict[str, subprocess.Popen[bytes]] = {}
    try:
        # the agents first: they start while the collector does, and upload once it listens
        for agent_id, tokyo in AGENTS.items():
            cfg = tmp_path / f"{agent_id}.toml"
            cfg.write_text(AGENT.format(id=agent_id, db=tmp_path / f"{agent_id}.db", tokyo=tokyo, port=PORT,
                                        token=tokens[agent_id]))
            with (tmp_path / f"{agent_id}.log").open("ab") as log:
                agents[agent_id] = subprocess.Popen(["ip", "netns", "exec", AGENT_NS, *CLI, "agent", "run",
                                                     "--config", str(cfg)], stdout=log, stderr=log)
        wait_for(Path(f"{hook_out}.ready").exists, 20, "the webhook receiver")
        collector.start()

        def both() -> bool:
            got = received(hook_out)
            return any(not n["local"] for n in got) and any(n["local"] for n in got)

        wait_for(both, 45, "a quorum alert and a local one at the webhook", every=0.5)
        seen_at = time.monotonic()
        time.sleep(7.0)    # one more window and its settle: nothing else may come
    finally:
        for proc in agents.values():
            proc.send_signal(signal.SIGTERM)
        codes = {a: p.wait(15) for a, p in agents.items()}
        status = collector.stop()
        hook.terminate()
        hook.wait(10)
    logs = {a: (tmp_path / f"{a}.log").read_text() for a in AGENTS}
    assert all(code == 0 for code in codes.values()), logs
    assert status == 0 and "Traceback" not in collector.log(), collector.log()[-3000:]

    notes = received(hook_out)
    route = [n for n in notes if not n["local"]]
    local = [n for n in notes if n["local"]]
    # one route problem: hk, firing, every agent of the region agreeing
    assert len(route) == 1, notes
    [alert] = route
    assert (alert["state"], alert["datacenter"], alert["line"], alert["scope"], alert["scope_value"],
            alert["quorum"], alert["agent"]) == ("firing", "hk", "cn2-gia", "region", "cn-east", 2, None)
    assert alert["agents"] == ["la", "lb", "lc"] and alert["targets"] == ["hk-cn2"]
    assert all(v > 10.0 for v in alert["agent_values"].values()) and alert["value"] > 10.0
    # lc's last mile: local, naming only lc, on tokyo
    assert local and all((n["state"], n["agent"], n["target"], n["agents"], n["datacenter"]) ==
                         ("firing", "lc", "tyo-cn2", ["lc"], "tokyo") for n in local), local
    assert len(local) == 1 and "last mile" in local[0]["summary"], local

    async def recorded() -> tuple[list[history.AlertEvent], list[RouteAlert], str, str]:
        store = await open_store(f"sqlite:///{db}", upgrade=False)
        try:
            now = utc_now()
            page = await target_page(store, "lc", "tyo-cn2", 1, "/")
            assert page is not None
            return (await history.history(store, "lc", "tyo-cn2", now - timedelta(minutes=5), now),
                    await firing_routes(store), (await overview_page(store, "/", now))[1], page[1])
        finally:
            await store.close()

    lc_tokyo, routes, overview, lc_page = asyncio.run(recorded())
    # the dashboard says the same: hk's alert as the route's on every agent, tokyo's as lc's own
    for agent_id in AGENTS:
        assert f"/target/{agent_id}/hk-cn2" in overview
    assert overview.count("loss (route, 3 agents)") == 3 and overview.count("loss (local)") == 1, overview
    assert 'class="alert-history"' in lc_page and "local (last mile)" in lc_page
    assert [(e.state, e.local, e.agents) for e in lc_tokyo] == [("local", True, ("lc",))]
    assert [(r.datacenter, r.local, r.agents) for r in routes] == [
        ("hk", False, ("la", "lb", "lc")), ("tokyo", True, ("lc",))]
    print(f"quorum lab: alerts after {seen_at - t0:.1f} s, test {time.monotonic() - t0:.1f} s")
