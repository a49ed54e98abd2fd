"""rmtr on the bundled lab's asymmetric routes (agents/lab.toml), through the real path: a `netprobe
target --tokens` in each route's datacenter namespace traces back toward the agent when asked, and the
agent classifies what it gets with its own rules. hk-gia-163 goes out on CN2 GIA and comes back on 163;
la-163-gt goes out on 163 and comes back on CN2 GT. The scheduled agent records each direction's route
events apart: the way back re-pathed while it runs is one return path change, and nothing forward."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.farend import issue, target_cli
from tests.support.lab import LabState, agent_exec, agent_process, running_lab, spec_toml, wait_healthy
from tests.support.schema import assert_schema_valid
from tests.support.store import path_events

pytestmark = pytest.mark.lab

BUNDLED = Path(__file__).resolve().parents[2] / "agents" / "lab.toml"
PORT = 8473
ROUTES = {"hk-gia-163": ("cn2-gia", "163"), "la-163-gt": ("163", "cn2-gt")}   # forward, return


@dataclass(frozen=True)
class Lab:
    state: LabState
    tokens: dict[str, str]          # agent id → its reflector token (a token's traces are rate-limited)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    tmp = tmp_path_factory.mktemp("rmtr-lab")
    tokens_file = tmp / "tokens.json"
    tokens = {agent: issue(tokens_file, agent) for agent in ("lab-cli", "lab-agent")}
    with running_lab(BUNDLED) as state:
        namespaces = sorted({state.routes[r].namespace for r in ROUTES})
        serve = target_cli("--listen", f"0.0.0.0:{PORT}", "--tokens", str(tokens_file))
        servers = [subprocess.Popen(["ip", "netns", "exec", ns, *serve], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL) for ns in namespaces]
        try:
            for route in ROUTES:
                wait_healthy(state.routes[route].ipv4, PORT)
            yield Lab(state, tokens)
        finally:
            for s in servers:
                s.terminate()
            for s in servers:
                s.wait(timeout=10)


def probe(*args: str) -> dict[str, Any]:
    out = agent_exec([sys.executable, "-m", "netprobe.cli", "probe", *args, "--json"], timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def hosts(result: dict[str, Any]) -> list[str]:
    return [h["host"] for h in result["report"]["hubs"]]


def test_each_direction_has_its_line(lab: Lab, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(lab.tokens["lab-cli"])
    state = lab.state
    for route, (forward, back) in ROUTES.items():
        info = state.routes[route]
        out = probe("mtr", "-4", "-c", "2", "-i", "0.1", f"{route}.lab")
        assert hosts(out) == [state.isp_ipv4, *info.hops, info.ipv4] and out["route"]["label"] == forward
        ret = probe("rmtr", f"http://{info.ipv4}:{PORT}", "--token-file", str(token), "-c", "2", "-i", "0.1")
        # traced from the datacenter toward the agent as the datacenter sees it, classified here
        assert ret["probe"] == "rmtr" and ret["address"] == state.agent_ipv4 == ret["report"]["mtr"]["dst"]
        assert hosts(ret) == [*(info.return_hops or []), state.isp_ipv4, state.agent_ipv4]
        assert ret["route"]["label"] == back and ret["reached"] and ret["loss_pct"] <= 50.0
        assert ret["route"]["label"] != out["route"]["label"]              # asymmetric


AGENT_CONFIG = """
[agent]
id = "lab-agent"
region = "cn-east"
isp = "telecom"
timezone = "UTC"

[storage]
url = "sqlite:///{db}"

[reflector]
token_file = "{token}"

[probes.mtr]
every = "5s"
cycles = 2
interval = "0.1s"
timeout = "1s"

[probes.rmtr]
every = "31s"        # over a reflector's 30 s per agent, with room for the request's own delay
cycles = 2
interval = "0.1s"
timeout = "5s"

# target ids chosen so that their first rmtr round comes within a second of the start (the
# scheduler's stable spread of first runs)
[[targets]]
id = "hk-16"
host = "hk-gia-163.lab"
family = "ipv4"
datacenter = "hk-2"
line = "cn2-gia"
probes = ["mtr", "rmtr"]
reflector = "http://{hk}:8473"

[[targets]]
id = "la-9"
host = "la-163-gt.lab"
family = "ipv4"
datacenter = "la"
line = "cn2-gt"
probes = ["mtr", "rmtr"]
reflector = "http://{la}:8473"
"""


def test_agent_records_each_directions_events_apart(lab: Lab, tmp_path: Path) -> None:
    from netprobe.lab import api

    state = lab.state
    db, cfg, token = tmp_path / "agent.db", tmp_path / "agent.toml", tmp_path / "token"
    token.write_text(lab.tokens["lab-agent"])
    cfg.write_text(AGENT_CONFIG.format(db=db, token=token, hk=state.routes["hk-gia-163"].ipv4,
                                       la=state.routes["la-163-gt"].ipv4))
    spec = tomllib.loads(BUNDLED.read_text(encoding="utf-8"))
    moved_hop = "202.97.33.99"                     # still 163: the way back changes, not its line
    for route in spec["routes"]:
        if route["id"] == "hk-gia-163":
            route["return_hops"] = [route["return_hops"][0], moved_hop, *route["return_hops"][2:]]
    changed = tmp_path / "moved.toml"
    changed.write_text(spec_toml(spec))
    agent = agent_process(cfg, 40)
    assert agent.stderr is not None
    log: list[str] = []
    traced = 0
    try:
        for line in agent.stderr:
            log.append(line)
            if "probe=rmtr" in line and "target=hk-16 " in line:
                traced += 1
                if traced == 1:          # between two traces of the way back, never during one
                    api.set_impairments(changed)
        agent.wait(timeout=60)
    finally:
        api.set_impairments(BUNDLED)
    err = "".join(log)
    assert agent.returncode == 0 and traced == 2, err
    results, events = asyncio.run(_read(db))

    def rounds(probe: str, target: str) -> list[dict[str, Any]]:
        return [r["result"] for r in results if r["probe"] == probe and r["target"]["id"] == target]

    for target, route in (("hk-16", "hk-gia-163"), ("la-9", "la-163-gt")):
        forward, back = ROUTES[route]
        assert len(rounds("mtr", target)) >= 5 and len(rounds("rmtr", target)) == 2, err
        assert {r["route"]["label"] for r in rounds("mtr", target)} == {forward}
        assert {r["route"]["label"] for r in rounds("rmtr", target)} == {back}
    first, second = rounds("rmtr", "hk-16")
    assert [moved_hop] not in [h["addresses"] for h in first["report"]["hubs"]]
    assert [moved_hop] in [h["addresses"] for h in second["report"]["hubs"]]

    got = sorted((e["target_id"], e["direction"], e["kind"], e["label"]) for e in events)
    assert got == [
        ("hk-16", "return", "path_change", "163"),             # the way back re-pathed: return only
        ("hk-16", "return", "return_line_mismatch", "163"),    # sold as cn2-gia, comes back on 163
        ("la-9", "forward", "line_mismatch", "163"),           # sold as cn2-gt, goes out on 163
    ], events
    [change] = [e for e in events if e["kind"] == "path_change"]
    assert [moved_hop] in change["details"]["after"]["hops"]
    assert [moved_hop] not in change["details"]["before"]["hops"]


async def _read(db: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    from dataclasses import asdict

    from netprobe.store import open_store

    store = await open_store(f"sqlite:///{db}", upgrade=False)
    try:
        rows = [r.envelope.raw for r in await store.results()]
        assert_schema_valid(rows)   # the envelope schema the collector serves
        return (rows,
                [asdict(e) for e in await path_events(store)])
    finally:
        await store.close()
