"""The bundled lab's asymmetric routes (agents/lab.toml), traced both ways through the real path with
netprobe's own trace engine and labelled by its line classifier (docs/probes.md): hk-gia-163 goes out on
CN2 GIA and comes back on 163; la-163-gt goes out on 163 and comes back on CN2 GT."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.lab import LabState, running_lab

pytestmark = pytest.mark.lab

BUNDLED = Path(__file__).resolve().parents[2] / "agents" / "lab.toml"


@pytest.fixture(scope="module")
def lab() -> Iterator[LabState]:
    with running_lab(BUNDLED) as state:
        yield state


def trace(namespace: str, host: str) -> dict[str, Any]:
    proc = subprocess.run(["ip", "netns", "exec", namespace, sys.executable, "-m", "netprobe.cli", "probe",
                           "mtr", "-4", "-c", "2", "-i", "0.1", "--json", host],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


@pytest.mark.parametrize(("route", "forward", "back"), [("hk-gia-163", "cn2-gia", "163"),
                                                         ("la-163-gt", "163", "cn2-gt")])
def test_each_direction_has_its_line(lab: LabState, route: str, forward: str, back: str) -> None:
    info = lab.routes[route]
    out = trace(lab.agent_ns, f"{route}.lab")
    assert [h["host"] for h in out["report"]["hubs"]] == [lab.isp_ipv4, *info.hops, info.ipv4]
    assert out["route"]["label"] == forward
    # from the route's datacenter (its only route there) back toward the agent
    ret = trace(info.namespace, lab.agent_ipv4)
    assert [h["host"] for h in ret["report"]["hubs"]] == [*(info.return_hops or []), lab.isp_ipv4,
                                                          lab.agent_ipv4]
    assert ret["route"]["label"] == back
