"""Helpers for every lab test in the suite: a lab per test module, commands inside np-agent."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from netprobe.lab import api
from netprobe.lab.addressing import AGENT_NS
from netprobe.lab.awake import keep_awake
from netprobe.lab.state import LabState

__all__ = ["LabState", "agent_exec", "agent_process", "ping_rtts", "ping_summary", "require_root",
           "running_lab", "spec_toml", "write_spec"]


def require_root() -> None:
    """Skip (a failure in CI, see conftest) when the lab cannot be built here."""
    if os.geteuid() != 0:
        pytest.skip("needs root")


def agent_exec(args: list[str], timeout: float = 60.0,
               check: bool = False) -> subprocess.CompletedProcess[str]:
    """Run a command inside the agent namespace (np-agent); /etc/hosts there knows <route>.lab."""
    return subprocess.run(["ip", "netns", "exec", AGENT_NS, *args], capture_output=True, text=True,
                          timeout=timeout, check=check)


def wait_healthy(address: str, port: int) -> None:
    """Until `netprobe target` in a datacenter namespace answers /healthz from the agent's."""
    for _ in range(100):
        out = agent_exec([sys.executable, "-c", "import urllib.request as u; "
                          f"u.urlopen('http://{address}:{port}/healthz', timeout=1).read()"])
        if out.returncode == 0:
            return
        time.sleep(0.1)
    raise AssertionError(f"netprobe target on {address} did not come up")


def agent_process(config: Path, duration: float) -> subprocess.Popen[str]:
    """`netprobe agent run` in the agent namespace for `duration` seconds; stderr (its log) piped."""
    return subprocess.Popen(["ip", "netns", "exec", AGENT_NS, sys.executable, "-m", "netprobe.cli", "agent",
                             "run", "--config", str(config), "--duration", str(duration)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def spec_toml(spec: dict[str, Any]) -> str:
    """A lab spec dict ({"lab": {...}, "routes": [{...}, ...]}) as TOML text."""
    lines: list[str] = []
    for key, value in spec.items():
        if isinstance(value, dict):
            lines.append(f"[{key}]")
            lines += [f"{k} = {_toml_value(v)}" for k, v in value.items()]
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            for entry in value:
                lines.append(f"[[{key}]]")
                lines += [f"{k} = {_toml_value(v)}" for k, v in entry.items()]
        else:
            lines.insert(0, f"{key} = {_toml_value(value)}")
    return "\n".join(lines) + "\n"


def write_spec(spec: dict[str, Any] | Path, directory: Path) -> Path:
    if isinstance(spec, Path):
        return spec
    path = directory / "lab-spec.toml"
    path.write_text(spec_toml(spec))
    return path


@contextmanager
def running_lab(spec: dict[str, Any] | Path) -> Iterator[LabState]:
    """Bring a lab up (replacing any leftover one), yield its state, always bring it down.

    Tests run serially and share the one set of lab namespaces: one lab at a time. While it is up
    the VM's vCPUs are kept from halting (netprobe.lab.awake): their wake-up stalls of several ms
    would otherwise land in the RTTs the tests compare with the configured delay.
    """
    require_root()
    with keep_awake(), tempfile.TemporaryDirectory(prefix="netprobe-lab-") as tmp:
        path = write_spec(spec, Path(tmp))
        state = api.up(path, replace=True)
        try:
            yield state
        finally:
            api.down()


_RTT = re.compile(r"icmp_seq=(\d+) .*time=([\d.]+) ms")
_COUNTS = re.compile(r"(\d+) packets transmitted, (\d+) received")
_RTT_LINE = re.compile(r"rtt min/avg/max/mdev = ([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) ms")


def ping_rtts(output: str) -> list[tuple[int, float]]:
    """(icmp_seq, rtt ms) per reply line of iputils ping, in arrival order."""
    return [(int(m.group(1)), float(m.group(2))) for m in _RTT.finditer(output)]


def ping_summary(output: str) -> dict[str, float]:
    """iputils ping's closing lines: transmitted, received and (if any reply) min, avg, max, mdev."""
    counts = _COUNTS.search(output)
    if counts is None:
        raise AssertionError(f"no ping summary in:\n{output}")
    out = {"transmitted": float(counts.group(1)), "received": float(counts.group(2))}
    rtt = _RTT_LINE.search(output)
    if rtt is not None:
        out.update(zip(("min", "avg", "max", "mdev"), map(float, rtt.groups()), strict=True))
    return out


def target_in(namespace: str, port: int, *args: str) -> subprocess.Popen[bytes]:
    """`netprobe target --listen 0.0.0.0:PORT ARGS…` in a datacenter namespace (wait_healthy for it)."""
    return subprocess.Popen(["ip", "netns", "exec", namespace, sys.executable, "-m", "netprobe.cli", "target",
                             "--listen", f"0.0.0.0:{port}", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
