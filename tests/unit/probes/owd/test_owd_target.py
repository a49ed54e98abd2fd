"""`netprobe target --udp … --tokens …` as operators run it: tokens issued and revoked with
add-agent / revoke-agent, taken on SIGHUP, and the agent's owd round against the real process."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from netprobe.probes.owd import packets
from netprobe.probes.owd.client import exchange
from tests.support.farend import issue, running_reflector, target_cli

cli = target_cli


@pytest.fixture
def tokens(tmp_path: Path) -> Path:
    return tmp_path / "reflector-tokens.json"


@pytest.fixture
def reflector(tokens: Path) -> Iterator[tuple[subprocess.Popen[str], int, str, int]]:
    with running_reflector(tokens) as r:
        yield r.proc, r.udp, r.token, r.http


def test_add_agent_stores_no_token(tokens: Path) -> None:
    token = issue(tokens, "sh-ct-1")
    again = issue(tokens, "sh-ct-1")
    text = tokens.read_text()
    assert token != again and token not in text and again not in text
    assert tokens.stat().st_mode & 0o777 == 0o600
    entry = json.loads(text)["agents"]["sh-ct-1"]
    assert entry["owd_key"] == packets.derive_key(again).hex() and entry["revoked_at"] is None


Served = tuple[subprocess.Popen[str], int, str, int]


async def test_round_revoke_and_reload(reflector: Served, tokens: Path) -> None:
    proc, port, token, http = reflector
    x = await exchange(("127.0.0.1", port), packets.derive_key(token), count=10, interval=0.005, timeout=1.0)
    assert len(x.replies) == 10 and x.status_answered and x.seen_by_reflector == 10
    async with httpx.AsyncClient(timeout=60) as c:           # the same token opens the trace endpoint
        r = await c.post(f"http://127.0.0.1:{http}/api/v1/trace", json={"cycles": 1, "interval": 0.1},
                         headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200 and r.json()["address"] == "127.0.0.1", r.text

    out = subprocess.run(cli("revoke-agent", "sh-ct-1", "--tokens", str(tokens)), capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and "revoked" in out.stdout
    other = issue(tokens, "bj-cu-1")
    proc.send_signal(signal.SIGHUP)
    await asyncio.sleep(0.5)
    at = ("127.0.0.1", port)
    gone = await exchange(at, packets.derive_key(token), count=3, interval=0.001, timeout=0.3)
    new = await exchange(at, packets.derive_key(other), count=3, interval=0.001, timeout=1.0)
    assert gone.replies == [] and len(new.replies) == 3

    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "reflector tokens reloaded" in err
    m = re.search(r"reflector stopped.*traces=1.*replies=(\d+)", err)
    assert m and int(m.group(1)) == 11 + 4, err            # 10 + status, then 3 + status
    assert "key" in err.split("reflector stopped", 1)[1]    # the revoked agent's packets, dropped


@pytest.mark.parametrize(("args", "needle"), [
    (["--udp", "127.0.0.1:0"], "--udp: the reflector needs --tokens FILE"),
    (["--udp", "nowhere"], "--udp:"),
])
def test_bad_reflector_options_exit_2(args: list[str], needle: str) -> None:
    out = subprocess.run(cli("--listen", "127.0.0.1:0", *args), capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and needle in out.stderr, out.stderr


def test_bad_tokens_file_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "t.json"
    bad.write_text('{"version": 1, "agents": {"a": {"token_sha256": 1}}}')
    out = subprocess.run(cli("--listen", "127.0.0.1:0", "--udp", "127.0.0.1:0", "--tokens", str(bad)),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "malformed entry" in out.stderr, out.stderr
    out = subprocess.run(cli("revoke-agent", "nobody", "--tokens", str(tmp_path / "none.json")),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "does not exist" in out.stderr, out.stderr
