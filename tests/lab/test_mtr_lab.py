"""The mtr probe on the lab against ground truth: system mtr's hop list, the lab's configured hops, delay
and loss, a real router namespace rate-limiting its ICMP, and GeoIP-labelled carrier lines.

Everything runs through the real path: raw sockets in the agent namespace, the np-isp namespace's
kernel (hop 1), the relay's emulated routers, the datacenter namespace's kernel answering.
"""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from tests.support.lab import LabState, agent_exec, agent_process, running_lab, spec_toml
from tests.support.mmdb import write_asn_db
from tests.support.schema import assert_schema_valid
from tests.support.store import path_events, window_stats

pytestmark = pytest.mark.lab

ISP_V4, ISP_V6 = "198.18.0.2", "2001:2:0:ffff::2"
# Hop addresses no prefix rule knows: only the test's GeoIP database says whose routers they are.
GIA, GT, CU9929, CMIN2 = "198.18.101", "198.18.102", "198.18.103", "198.18.104"
SPEC: dict[str, Any] = {
    "lab": {"seed": 5},
    "routes": [
        {"id": "gia", "datacenter": "hk", "line": "cn2-gia", "rtt_ms": 20.0,
         "hops": [f"{GIA}.1", f"{GIA}.2", f"{GIA}.3"]},
        {"id": "gt", "datacenter": "tokyo", "line": "cn2-gia", "rtt_ms": 30.0,
         "hops": [f"{GIA}.1", f"{GT}.7", f"{GT}.9"]},
        {"id": "unicom", "datacenter": "singapore", "line": "cu-9929", "rtt_ms": 24.0,
         "hops": [f"{CU9929}.1", f"{CU9929}.2"]},
        {"id": "mobile", "datacenter": "us-west", "line": "cmin2", "rtt_ms": 40.0,
         "hops": [f"{CMIN2}.1", f"{CMIN2}.2", f"{CMIN2}.3"]},
        {"id": "lossy", "datacenter": "hk", "line": "163", "hops": ["202.97.1.1", "202.97.1.2"],
         "forward": {"delay_ms": 3.0, "loss_pct": 20.0}, "reverse": {"delay_ms": 3.0}},
    ],
}
ASNS = {f"{GIA}.0/24": (4809, "CN2"), f"{GT}.0/24": (4134, "CHINANET"), f"{CU9929}.0/24": (9929, "CU 9929"),
        f"{CMIN2}.0/24": (58807, "CMIN2")}
AVG_TOLERANCE_MS = 1.5


@pytest.fixture(scope="module")
def lab() -> Iterator[LabState]:
    with running_lab(SPEC) as state:
        yield state


@pytest.fixture(scope="module")
def asn_db() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as tmp:
        yield write_asn_db(Path(tmp) / "asn.mmdb", ASNS)


def mtr(*args: str, timeout: float = 120.0) -> tuple[int, dict[str, Any]]:
    proc = agent_exec([sys.executable, "-m", "netprobe.cli", "probe", "mtr", *args, "--json"],
                      timeout=timeout)
    assert proc.stdout, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def expected_hops(route: str, v6: bool = False) -> list[str]:
    spec = next(r for r in SPEC["routes"] if r["id"] == route)
    if v6:
        return []  # the lab numbers IPv6 hops itself; compared with system mtr instead
    return [ISP_V4, *spec["hops"]]


def hosts(report: dict[str, Any]) -> list[str]:
    return [h["host"] for h in report["report"]["hubs"]]


@pytest.mark.parametrize("route", ["gia", "gt"])
def test_hops_and_rtts_equal_system_mtr(lab: LabState, route: str) -> None:
    """Same path, same hop list as `mtr -n --json`, and each hop's Avg agrees with mtr's."""
    theirs = agent_exec(["mtr", "-4", "-n", "--json", "-c", "10", "-i", "0.2", f"{route}.lab"], timeout=60)
    assert theirs.returncode == 0, theirs.stderr
    ref = json.loads(theirs.stdout)
    code, ours = mtr("-4", "-c", "10", "-i", "0.2", f"{route}.lab")
    assert code == 0
    assert hosts(ours) == hosts(ref) == [*expected_hops(route), lab.routes[route].ipv4]
    for mine, their in zip(ours["report"]["hubs"], ref["report"]["hubs"], strict=True):
        assert mine["Snt"] == 10 and mine["Loss%"] == 0.0
        assert abs(mine["Avg"] - their["Avg"]) <= AVG_TOLERANCE_MS, (mine, their)
    dest = ours["report"]["hubs"][-1]
    assert abs(dest["Avg"] - lab.routes[route].rtt_ms) <= AVG_TOLERANCE_MS
    assert set(ours["report"]["mtr"]) >= {"src", "dst", "tos", "tests", "psize", "bitpattern"}
    assert ours["route"]["path_loss_pct"] == 0.0 and ours["loss_pct"] == 0.0


def _json_types(obj: dict[str, Any]) -> dict[str, str]:
    return {k: type(v).__name__ for k, v in obj.items()}


@pytest.mark.parametrize("route", ["gia", "lossy"])
def test_json_report_has_system_mtr_keys_and_types_hub_by_hub(lab: LabState, route: str) -> None:
    """Tools that parse `mtr --json` read netprobe's `report` unchanged: every key system mtr 0.95 writes
    in `report.mtr` and in each hub, in mtr's order, with the same JSON type (psize a string, count and
    Snt integers, the figures floats); Javg too, asked of mtr with -o. netprobe's own keys follow."""
    version = subprocess.run(["mtr", "--version"], capture_output=True, text=True, check=True).stdout
    assert version.split() == ["mtr", "0.95"], version
    theirs = agent_exec(["mtr", "-4", "-n", "--json", "-o", "LSNABWVM", "-c", "5", "-i", "0.2",
                         f"{route}.lab"], timeout=60)
    assert theirs.returncode == 0, theirs.stderr
    ref = json.loads(theirs.stdout)["report"]
    code, full = mtr("-4", "-c", "5", "-i", "0.2", f"{route}.lab")
    assert code == 0, full
    ours = full["report"]
    assert list(ours) == list(ref) == ["mtr", "hubs"]
    assert list(ours["mtr"]) == list(ref["mtr"]) == ["src", "dst", "tos", "tests", "psize", "bitpattern"]
    assert _json_types(ours["mtr"]) == _json_types(ref["mtr"])
    assert {k: ours["mtr"][k] for k in ("dst", "tos", "tests", "bitpattern")} == \
        {k: ref["mtr"][k] for k in ("dst", "tos", "tests", "bitpattern")}
    assert [h["host"] for h in ours["hubs"]] == [h["host"] for h in ref["hubs"]]
    for mine, their in zip(ours["hubs"], ref["hubs"], strict=True):
        assert list(mine)[:len(their)] == list(their), (mine, their)
        assert {k: type(mine[k]).__name__ for k in their} == _json_types(their), (mine, their)
        assert mine["count"] == their["count"] and mine["Snt"] == their["Snt"] == 5
        # netprobe's additions (docs/api.md) stay, after mtr's keys
        assert {"ASN", "org", "country", "addresses", "rate_limited", "icmp_errors"} <= set(mine)
    assert set(full["route"]) >= {"label", "asns", "path_loss_pct", "hash"}


@pytest.mark.parametrize("mode", ["icmp", "udp", "tcp"])
@pytest.mark.parametrize("family", ["-4", "-6"])
def test_every_mode_reaches_the_destination(lab: LabState, mode: str, family: str) -> None:
    code, ours = mtr(family, "--mode", mode, "-c", "3", "-i", "0.2", "gia.lab")
    assert code == 0, ours
    info = lab.routes["gia"]
    assert ours["reached"] and ours["status"] == "ok" and ours["mode"] == mode
    assert ours["port"] == {"icmp": None, "udp": 33434, "tcp": 443}[mode]
    hubs = ours["report"]["hubs"]
    assert len(hubs) == 1 + len(SPEC["routes"][0]["hops"]) + 1
    assert all(h["Loss%"] == 0.0 for h in hubs), hubs
    if family == "-4":
        assert hosts(ours) == [*expected_hops("gia"), info.ipv4]
    else:
        assert hubs[0]["host"] == ISP_V6 and hubs[-1]["host"] == info.ipv6


def test_concurrent_traces_do_not_mix(lab: LabState) -> None:
    """Every route in every mode at once through one engine: each trace sees only its own path."""
    script = (
        "import asyncio, json\n"
        "from netprobe.probes.base import ProbeContext, ProbeTarget\n"
        "from netprobe.probes.mtr.runtime import MtrSettings, trace\n"
        "from netprobe.net.resolve import Resolver\n"
        "async def main():\n"
        "    ctx = ProbeContext(resolver=Resolver())\n"
        "    jobs = [(r, m) for r in ('gia', 'gt', 'unicom', 'mobile') for m in ('icmp', 'udp', 'tcp')]\n"
        "    outs = await asyncio.gather(*(trace(ProbeTarget(id=r, host=r + '.lab', family=2),\n"
        "        MtrSettings(mode=m, cycles=5, interval=0.1, timeout=1.0), ctx) for r, m in jobs))\n"
        "    await ctx.close()\n"
        "    print(json.dumps([[r, m, o.to_dict()] for (r, m), o in zip(jobs, outs)]))\n"
        "asyncio.run(main())\n")
    proc = agent_exec([sys.executable, "-c", script], timeout=60)
    assert proc.returncode == 0, proc.stderr
    for route, mode, out in json.loads(proc.stdout):
        assert hosts(out) == [*expected_hops(route), lab.routes[route].ipv4], (route, mode)
        assert out["loss_pct"] == 0.0 and all(h["Snt"] == 5 for h in out["report"]["hubs"]), (route, mode)


def test_rate_limiting_router_is_flagged_not_path_loss(lab: LabState) -> None:
    """np-isp (hop 1) answers Time Exceeded at most once a second after a burst: loss at its hop only."""
    isp = ["ip", "netns", "exec", lab.isp_ns, "sysctl", "-q", "-w"]
    subprocess.run([*isp, "net.ipv4.icmp_ratelimit=1000", "net.ipv4.icmp_ratemask=6168"], check=True)
    try:
        code, ours = mtr("-4", "-c", "30", "-i", "0.05", "gia.lab")
    finally:
        subprocess.run([*isp, "net.ipv4.icmp_ratelimit=0"], check=True)
    assert code == 0
    first, *rest = ours["report"]["hubs"]
    assert first["host"] == ISP_V4 and first["Loss%"] >= 50.0 and first["rate_limited"]
    assert all(h["Loss%"] == 0.0 and not h["rate_limited"] for h in rest), rest
    assert ours["route"]["path_loss_pct"] == 0.0 and ours["loss_pct"] == 0.0 and ours["status"] == "ok"


def test_route_loss_is_path_loss(lab: LabState) -> None:
    """20 % loss configured on the way out shows at the destination, within binomial bounds."""
    cycles = 200
    code, ours = mtr("-4", "-c", str(cycles), "-i", "0.02", "lossy.lab")
    assert code == 0
    dest = ours["report"]["hubs"][-1]
    assert dest["host"] == lab.routes["lossy"].ipv4 and not dest["rate_limited"]
    sd = math.sqrt(0.2 * 0.8 / cycles) * 100
    assert abs(dest["Loss%"] - 20.0) <= 5 * sd
    assert ours["route"]["path_loss_pct"] == dest["Loss%"] == ours["loss_pct"]
    assert ours["sent"] == cycles and ours["received"] == round(cycles * (1 - dest["Loss%"] / 100))


@pytest.mark.parametrize(("route", "label", "asns"), [
    ("gia", "cn2-gia", [4809]), ("gt", "cn2-gt", [4809, 4134]), ("unicom", "cu-9929", [9929]),
    ("mobile", "cmin2", [58807])])
def test_geoip_labels_the_line(lab: LabState, asn_db: Path, route: str, label: str, asns: list[int]) -> None:
    code, ours = mtr("-4", "-c", "2", "-i", "0.1", "--asn-db", str(asn_db), f"{route}.lab")
    assert code == 0
    assert ours["route"]["label"] == label and ours["route"]["asns"] == asns
    assert ours["report"]["hubs"][1]["ASN"] == f"AS{asns[0]}"
    code, bare = mtr("-4", "-c", "2", "-i", "0.1", f"{route}.lab")  # no database: nobody knows these routers
    assert bare["route"]["label"] == "other" and bare["report"]["hubs"][1]["ASN"] == "AS???"
    assert bare["route"]["hash"] == ours["route"]["hash"]  # the path is the same, only its labels differ


AGENT_CONFIG = """
[agent]
id = "lab-mtr"
region = "cn-east"
isp = "telecom"
timezone = "Asia/Shanghai"

[storage]
url = "sqlite:///{db}"

[geoip]
asn_db = "{asn_db}"

[probes.icmp]
every = "1s"
count = 5
interval = "0.1s"
timeout = "0.5s"

[probes.mtr]
every = "2s"
cycles = 3
interval = "0.2s"
timeout = "0.8s"

[[targets]]
id = "gt"
host = "gt.lab"
family = "ipv4"
line = "cn2-gia"
probes = ["icmp", "mtr"]

[[targets]]
id = "gia"
host = "gia.lab"
family = "ipv4"
line = "cn2-gia"
probes = ["icmp", "mtr"]
"""


def test_agent_stores_traces_and_one_event_per_path_change(lab: LabState, asn_db: Path,
                                                           tmp_path: Path) -> None:
    """The scheduled agent, icmp rounds beside its traces: a route re-pathed while it runs gives one
    path_change (hops before and after), the GT path sold as GIA one line_mismatch, and the
    destination's figures reach the hourly rollups."""
    from netprobe.lab import api

    db = tmp_path / "agent.db"
    cfg = tmp_path / "agent.toml"
    cfg.write_text(AGENT_CONFIG.format(db=db, asn_db=asn_db))
    moved = {**SPEC, "routes": [{**r, "hops": [f"{GIA}.1", f"{GT}.7", f"{GT}.11"]} if r["id"] == "gt" else r
                                for r in SPEC["routes"]]}
    original, changed = tmp_path / "original.toml", tmp_path / "moved.toml"
    original.write_text(spec_toml(SPEC))
    changed.write_text(spec_toml(moved))
    agent = agent_process(cfg, 14)
    assert agent.stderr is not None
    log: list[str] = []
    try:
        # Re-path right after a trace of gt ends (its log line), not in the middle of one: a trace that
        # spans the change sees both routers at hop 3 — a path of its own, and a second change.
        traced = 0
        for line in agent.stderr:
            log.append(line)
            if "probe=mtr" in line and "target=gt " in line:
                traced += 1
                if traced == 2:
                    api.set_impairments(changed)
                    break
        log += agent.stderr.readlines()
        agent.wait(timeout=60)
    finally:
        api.set_impairments(original)
    err = "".join(log)
    assert agent.returncode == 0 and traced == 2, err
    results, events, window = asyncio.run(_read_agent_db(db))
    traces = {t: [r["result"] for r in results if r["probe"] == "mtr" and r["target"]["id"] == t]
              for t in ("gt", "gia")}
    assert len(traces["gt"]) >= 4 and len(traces["gia"]) >= 4
    assert all(r["route"]["label"] == "cn2-gt" and r["route"]["mismatch"] for r in traces["gt"])
    assert all(r["route"]["label"] == "cn2-gia" and not r["route"]["mismatch"] for r in traces["gia"])
    assert all(hosts(r) == [*expected_hops("gia"), lab.routes["gia"].ipv4] for r in traces["gia"])
    changes = [e for e in events if e["kind"] == "path_change"]
    assert [e["target_id"] for e in changes] == ["gt"], changes
    before, after = changes[0]["details"]["before"], changes[0]["details"]["after"]
    assert [f"{GT}.9"] in before["hops"] and [f"{GT}.11"] in after["hops"]
    assert before["hash"] != after["hash"] == changes[0]["new_hash"]
    mismatches = [e for e in events if e["kind"] == "line_mismatch"]
    assert [e["target_id"] for e in mismatches] == ["gt"]
    details = mismatches[0]["details"]
    assert details["detected"] == "cn2-gt" and details["declared"] == "cn2-gia"
    assert window is not None and window.loss_pct == 0.0 and window.rtt_p50_ms is not None
    assert abs(window.rtt_p50_ms - lab.routes["gia"].rtt_ms) <= AVG_TOLERANCE_MS


async def _read_agent_db(db: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]], Any]:
    from datetime import UTC, datetime, timedelta

    from netprobe.store import open_store

    store = await open_store(f"sqlite:///{db}", upgrade=False)
    try:
        now = datetime.now(UTC)
        window = await window_stats(store, "lab-mtr", "gia", "mtr", now - timedelta(hours=2),
                                    now + timedelta(hours=1))
        rows = [r.envelope.raw for r in await store.results("lab-mtr")]
        assert_schema_valid(rows)   # the envelope schema the collector serves
        return (rows,
                [asdict(e) for e in await path_events(store, "lab-mtr")], window)
    finally:
        await store.close()
