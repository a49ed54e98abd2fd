"""systemd units: hardened (exposure ≤ 2.0) and valid; the agent and the reflector have CAP_NET_RAW
only, the emitter and the collector none."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

UNIT = Path(__file__).resolve().parents[2] / "systemd" / "netprobe-agent.service"
TARGET_UNIT = UNIT.with_name("netprobe-target.service")
COLLECTOR_UNIT = UNIT.with_name("netprobe-collector.service")
REFLECTOR_UNIT = UNIT.with_name("netprobe-reflector.service")
UNITS = [UNIT, TARGET_UNIT, COLLECTOR_UNIT, REFLECTOR_UNIT]
INSTALLED_PATH = "/usr/local/bin/netprobe"
MAX_EXPOSURE = 2.0

ANALYZE = shutil.which("systemd-analyze")
needs_analyze = pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze not found: install systemd "
                                   "(apt-get install systemd) to check the unit")


def directives(unit: Path = UNIT) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in unit.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith(("#", ";", "[")):
            key, _, value = line.partition("=")
            out.setdefault(key, []).append(value)
    return out


def test_unit_pins() -> None:
    d = directives()
    assert d["ExecStart"] == [f"{INSTALLED_PATH} agent run --config /etc/netprobe/agent.toml"]
    assert d["ExecReload"] == ["/bin/kill -HUP $MAINPID"]
    assert d["Type"] == ["simple"]
    assert d["CapabilityBoundingSet"] == ["CAP_NET_RAW"]
    assert d["AmbientCapabilities"] == ["CAP_NET_RAW"]
    assert d["DynamicUser"] == ["yes"] and "User" not in d  # never root
    assert d["StateDirectory"] == ["netprobe"]
    assert d["KillSignal"] == ["SIGTERM"] and d["TimeoutStopSec"] == ["10"]
    assert d["Restart"] == ["on-failure"]
    assert "IPAddressDeny" not in d and d["PrivateNetwork"] == ["no"] and d["PrivateUsers"] == ["no"]


def test_every_relaxation_is_commented() -> None:
    lines = UNIT.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if re.match(r"^(PrivateNetwork|PrivateUsers)=no$", line):
            assert lines[i - 1].startswith("#"), f"{line} needs a comment saying why"
    text = UNIT.read_text(encoding="utf-8")
    assert re.search(r"^#.*IPAddressDeny", text, re.M), "say why there is no IPAddressDeny="


def test_target_unit_pins() -> None:
    d = directives(TARGET_UNIT)
    assert d["ExecStart"] == [f"{INSTALLED_PATH} target --listen 0.0.0.0:8473"]
    assert d["Type"] == ["simple"]
    # no capabilities at all: it only listens on a TCP port ≥ 1024
    assert d["CapabilityBoundingSet"] == [""] and d["AmbientCapabilities"] == [""]
    assert d["DynamicUser"] == ["yes"] and "User" not in d and d["PrivateUsers"] == ["yes"]
    assert d["NoNewPrivileges"] == ["yes"] and d["ProtectSystem"] == ["strict"]
    assert d["SocketBindAllow"] == ["tcp:8473"] and d["SocketBindDeny"] == ["any"]
    assert d["KillSignal"] == ["SIGTERM"] and d["RestartPreventExitStatus"] == ["2"]
    lines = TARGET_UNIT.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if re.match(r"^PrivateNetwork=no$", line):
            assert lines[i - 1].startswith("#"), f"{line} needs a comment saying why"
    assert re.search(r"^#.*IPAddressDeny", "\n".join(lines), re.M), "say why there is no IPAddressDeny="


def test_reflector_unit_pins() -> None:
    """The same command as the emitter's, with the reflector: CAP_NET_RAW only (the reverse traces'
    raw sockets), the agents' tokens as a credential, never root."""
    d = directives(REFLECTOR_UNIT)
    assert d["ExecStart"] == [f"{INSTALLED_PATH} target --listen 0.0.0.0:8473 --udp 0.0.0.0:8473 "
                              "--tokens %d/tokens"]
    assert d["LoadCredential"] == ["tokens:/etc/netprobe/reflector-tokens.json"]
    assert d["CapabilityBoundingSet"] == ["CAP_NET_RAW"] and d["AmbientCapabilities"] == ["CAP_NET_RAW"]
    assert d["DynamicUser"] == ["yes"] and "User" not in d and d["PrivateUsers"] == ["no"]
    assert d["NoNewPrivileges"] == ["yes"] and d["ProtectSystem"] == ["strict"]
    assert d["KillSignal"] == ["SIGTERM"] and d["RestartPreventExitStatus"] == ["2"]
    lines = REFLECTOR_UNIT.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if re.match(r"^(PrivateNetwork|PrivateUsers)=no$", line):
            assert lines[i - 1].startswith("#"), f"{line} needs a comment saying why"
    text = "\n".join(lines)
    assert re.search(r"^#.*IPAddressDeny", text, re.M), "say why there is no IPAddressDeny="
    assert re.search(r"^#.*SocketBindDeny", text, re.M), "say why there is no SocketBindDeny="


def test_collector_unit_pins() -> None:
    d = directives(COLLECTOR_UNIT)
    assert d["ExecStart"] == [f"{INSTALLED_PATH} collector run --config /etc/netprobe/collector.toml"]
    assert d["Type"] == ["simple"]
    # no capabilities at all: it listens on TCP 8471 (≥ 1024) and connects to PostgreSQL
    assert d["CapabilityBoundingSet"] == [""] and d["AmbientCapabilities"] == [""]
    assert d["DynamicUser"] == ["yes"] and d["User"] == ["netprobe"] and d["PrivateUsers"] == ["yes"]
    assert d["NoNewPrivileges"] == ["yes"] and d["ProtectSystem"] == ["strict"]
    assert d["SocketBindAllow"] == ["tcp:8471"] and d["SocketBindDeny"] == ["any"]
    assert d["RestrictAddressFamilies"] == ["AF_INET AF_INET6 AF_UNIX"]   # AF_UNIX: PostgreSQL's socket
    assert d["KillSignal"] == ["SIGTERM"] and d["RestartPreventExitStatus"] == ["2"]
    assert "StateDirectory" not in d     # stateless apart from the database
    lines = COLLECTOR_UNIT.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if re.match(r"^PrivateNetwork=no$", line):
            assert lines[i - 1].startswith("#"), f"{line} needs a comment saying why"
    assert re.search(r"^#.*IPAddressDeny", "\n".join(lines), re.M), "say why there is no IPAddressDeny="


@needs_analyze
@pytest.mark.parametrize("unit", UNITS, ids=lambda u: u.stem)
def test_security_exposure_within_goal(unit: Path) -> None:
    assert ANALYZE is not None
    run = subprocess.run([ANALYZE, "security", "--offline=true", "--no-pager", str(unit)],
                         capture_output=True, text=True, timeout=120, check=False)
    output = run.stdout + run.stderr
    m = re.search(r"Overall exposure level for \S+: (\d+(?:\.\d+)?)", output)
    assert m, output
    exposure = float(m.group(1))
    assert exposure <= MAX_EXPOSURE, f"exposure {exposure} > {MAX_EXPOSURE}\n{output}"
    assert "Unknown key" not in output, output


def installed_netprobe() -> str:
    """The netprobe script of this interpreter's installation (what pip put next to python)."""
    beside = Path(sys.executable).parent / "netprobe"
    found = str(beside) if beside.is_file() else shutil.which("netprobe")
    assert found, "netprobe is not installed (pip install -e '.[dev]')"
    return found


@needs_analyze
@pytest.mark.parametrize("unit", UNITS, ids=lambda u: u.stem)
def test_systemd_analyze_verify(unit: Path, tmp_path: Path) -> None:
    # verify checks that ExecStart= exists; on a test machine netprobe is installed wherever pip put it,
    # so check a copy that points there. Every other line is verified exactly as shipped.
    assert ANALYZE is not None
    text = unit.read_text(encoding="utf-8")
    assert text.count(INSTALLED_PATH) == 1
    copy = tmp_path / unit.name
    copy.write_text(text.replace(INSTALLED_PATH, installed_netprobe()), encoding="utf-8")
    run = subprocess.run([ANALYZE, "verify", "--man=no", str(copy)], capture_output=True, text=True,
                         timeout=120, check=False)
    # verify exits 0 even for unknown or misspelt directives; it only warns, so any output is a failure.
    assert run.returncode == 0 and run.stdout.strip() == "" and run.stderr.strip() == "", \
        run.stdout + run.stderr
