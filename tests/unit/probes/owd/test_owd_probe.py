"""The owd probe through its real paths: `netprobe probe owd` and the agent (config → round → store →
rollup → report) against a real `netprobe target --udp --tokens` on loopback."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from netprobe.agent.daemon import Agent
from netprobe.cli import app
from netprobe.config.agent import load_config
from netprobe.times import utc_now
from tests.support.farend import Reflector, running_reflector


@pytest.fixture
def reflector(tmp_path: Path) -> Iterator[Reflector]:
    with running_reflector(tmp_path / "tokens.json") as r:
        yield r


def probe_owd(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "netprobe.cli", "probe", "owd", *args], capture_output=True,
                          text=True, timeout=120, env=env)


def test_probe_owd_json_on_loopback(reflector: Reflector, tmp_path: Path) -> None:
    token = tmp_path / "reflector.token"
    token.write_text(reflector.token + "\n")
    out = probe_owd(f"127.0.0.1:{reflector.udp}", "--token-file", str(token), "--count", "40",
                    "--interval", "10ms", "--json")
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert (r["probe"], r["status"], r["sent"], r["received"]) == ("owd", "ok", 40, 40)
    assert r["loss_pct"] == r["fwd_loss_pct"] == r["ret_loss_pct"] == 0.0
    assert 0 < r["rtt_ms"]["min"] <= r["rtt_ms"]["p50"] < 5.0        # loopback, reflector time taken out
    for way in ("fwd_delay_var_ms", "ret_delay_var_ms"):
        assert set(r[way]) == {"p50", "p95", "max"} and 0 <= r[way]["p50"] <= r[way]["p95"] <= r[way]["max"]
    assert r["fwd_ms"] is None and r["ret_ms"] is None and r["clock_sync"] is False
    assert r["bad_packets"] == 0 and len(r["samples_ms"]) == 40

    synced = probe_owd(f"127.0.0.1:{reflector.udp}", "--token-file", str(token), "--count", "5",
                       "--interval", "10ms", "--clock-sync", "--json")
    s = json.loads(synced.stdout)
    # one clock on loopback: each way is a fraction of a millisecond, never negative
    assert 0 <= s["fwd_ms"] < 5.0 and 0 <= s["ret_ms"] < 5.0 and s["clock_sync"] is True


def test_probe_owd_table_and_a_wrong_token(reflector: Reflector, tmp_path: Path) -> None:
    wrong = tmp_path / "wrong.token"
    wrong.write_text("not-the-token")
    out = probe_owd(f"127.0.0.1:{reflector.udp}", "--token-file", str(wrong), "--count", "3",
                    "--interval", "10ms", "--timeout", "0.3s")
    # the reflector drops what it cannot authenticate: no reply, every request lost, data not a crash
    assert out.returncode == 1, out.stderr
    assert "owd" in out.stdout and "down" in out.stdout


@pytest.mark.parametrize(("args", "env", "needle"), [
    ([], {}, "--token-file: the reflector needs this agent's token"),
    (["--token-file", "/nonexistent/token"], {}, "--token-file /nonexistent/token"),
    (["--interval", "1ms", "--token-file", "/dev/null"], {}, "--interval"),
])
def test_probe_owd_bad_input_exits_2(args: list[str], env: dict[str, str], needle: str) -> None:
    out = probe_owd("127.0.0.1:9", *args, env={"PATH": "/usr/bin:/bin", **env})
    assert out.returncode == 2 and needle in out.stderr, out.stderr


AGENT = """
[agent]
id = "sh-ct-1"
region = "cn-east"
isp = "telecom"
timezone = "UTC"

[storage]
url = "sqlite:///{db}"

[reflector]
token_file = "{token}"

[probes.owd]
every = "1s"
count = 20
interval = "20ms"
timeout = "0.3s"

[[targets]]
id = "hk-cn2"
host = "127.0.0.1"
datacenter = "hk"
line = "cn2-gia"
probes = ["owd"]
reflector = "http://127.0.0.1:{http}"

[targets.owd]
port = {udp}
"""


def test_agent_rounds_reach_the_report(reflector: Reflector, tmp_path: Path) -> None:
    db, cfg, token = tmp_path / "agent.db", tmp_path / "agent.toml", tmp_path / "reflector.token"
    token.write_text(reflector.token)
    cfg.write_text(AGENT.format(db=db, token=token, http=reflector.http, udp=reflector.udp))
    config = load_config(cfg)
    assert asyncio.run(Agent(cfg, config, duration=3.5).run()) == 0

    hour = utc_now().hour
    report = CliRunner().invoke(app, ["report", "peak", "--db", f"sqlite:///{db}", "--days", "1",
                                      "--window", f"{(hour - 1) % 24}-{(hour + 1) % 24}", "--format", "json"])
    assert report.exit_code == 0, report.output
    (row,) = json.loads(report.output)["rows"]
    peak = row["peak"]
    assert row["rtt_probe"] == "owd" and peak["rounds"] >= 2
    assert peak["loss_pct"] == peak["fwd_loss_pct"] == peak["ret_loss_pct"] == 0.0
    assert peak["owd_rtt_p95_ms"] is not None and peak["ret_delay_var_p95_ms"] is not None
    assert peak["fwd_ms"] is None                       # clock_sync is false
    md = CliRunner().invoke(app, ["report", "peak", "--db", f"sqlite:///{db}", "--days", "1",
                                  "--window", f"{(hour - 1) % 24}-{(hour + 1) % 24}", "--format", "md"])
    head = next(line for line in md.output.splitlines() if line.startswith("| region"))
    assert all(f" {c} " in head for c in ("fwd loss%", "ret loss%", "fwd var p95", "ret var p95")), head
    page = CliRunner().invoke(app, ["report", "peak", "--db", f"sqlite:///{db}", "--days", "1",
                                    "--window", f"{(hour - 1) % 24}-{(hour + 1) % 24}", "--format", "html"])
    assert "<h2>Both directions</h2>" in page.output and "lost on the way back" in page.output
    budget = CliRunner().invoke(app, ["budget", "--db", f"sqlite:///{db}", "--ttft-ms", "1000", "--days", "1",
                                      "--window", f"{(hour - 1) % 24}-{(hour + 1) % 24}", "--json"])
    assert budget.exit_code == 0, budget.output
    (b,) = json.loads(budget.output)["rows"]
    assert b["jitter_source"] == "owd-ret"              # the way back's delay variation
    assert b["jitter_margin_ms"] == pytest.approx(peak["ret_delay_var_p95_ms"] - peak["ret_delay_var_p50_ms"])


def test_config_asks_for_the_reflector_and_its_token(tmp_path: Path) -> None:
    cfg = tmp_path / "agent.toml"
    text = AGENT.format(db=tmp_path / "x.db", token="t", http=1, udp=2)
    cfg.write_text(text.replace('[reflector]\ntoken_file = "t"\n', ""))
    out = CliRunner().invoke(app, ["config", "check", str(cfg)])
    assert out.exit_code == 2 and "reflector.token_file: targets hk-cn2 use a reflector" in out.output
    cfg.write_text(text.replace('reflector = "http://127.0.0.1:1"\n', ""))
    out = CliRunner().invoke(app, ["config", "check", str(cfg)])
    assert out.exit_code == 2 and "targets[0]: reflector: required when probes include owd" in out.output


def test_agent_with_an_unreadable_token_file_exits_2(tmp_path: Path) -> None:
    cfg = tmp_path / "agent.toml"
    cfg.write_text(AGENT.format(db=tmp_path / "x.db", token=tmp_path / "missing", http=1, udp=2))
    out = subprocess.run([sys.executable, "-m", "netprobe.cli", "agent", "run", "--config", str(cfg),
                          "--duration", "1"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "reflector.token_file" in out.stderr, out.stderr
