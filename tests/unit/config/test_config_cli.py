"""`netprobe config check FILE`: OK + summary and exit 0, or every problem on its own line and exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from netprobe.cli import app

ROOT = Path(__file__).resolve().parents[3]
BAD = """
[agent]
id = "x"
region = "cn-east"
isp = "telecom"
timezone = "Nowhere/Special"
[probes.icmp]
count = 0
[[targets]]
id = "a"
host = "a.example.net"
probes = ["icmp", "ping"]
[[targets]]
id = "a"
host = "b.example.net"
probes = ["tcp"]
tcp_port = 0
"""


def test_check_ok_prints_summary() -> None:
    result = CliRunner().invoke(app, ["config", "check", str(ROOT / "config.example.toml")])
    assert result.exit_code == 0, result.output
    assert "OK: 2 targets, 6 jobs" in result.output      # hk-cn2: icmp tcp mtr rmtr owd; tyo-163: tcp
    assert "hk1.example.net" in result.output


def test_check_reports_every_problem_one_per_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(BAD, encoding="utf-8")
    result = CliRunner().invoke(app, ["config", "check", str(path)])
    assert result.exit_code == 2
    lines = result.output.splitlines()
    assert lines[0] == f"{path}: 5 problems"
    paths = [line.split(":")[0] for line in lines[1:]]
    assert paths == ["agent.timezone", "probes.icmp.count", "targets[0].probes[1]", "targets[1].tcp_port",
                     "targets[1].id"]
    assert "Traceback" not in result.output


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "netprobe.cli", *args], capture_output=True, text=True,
                          timeout=60, check=False)


def test_real_command_exit_codes_and_no_traceback(tmp_path: Path) -> None:
    ok = run_cli("config", "check", str(ROOT / "agents" / "lab-agent.toml"))
    assert ok.returncode == 0, ok.stderr
    assert "OK: 10 targets, 30 jobs" in ok.stdout
    broken = tmp_path / "broken.toml"
    broken.write_text('[agent]\nid = "x"\nregion = [\n', encoding="utf-8")
    for path in (broken, tmp_path / "missing.toml"):
        bad = run_cli("config", "check", str(path))
        assert bad.returncode == 2, bad.stdout + bad.stderr
        assert "Traceback" not in bad.stderr + bad.stdout
        assert str(path) in bad.stderr
    assert "line 4, column 1 (end of file)" in run_cli("config", "check", str(broken)).stderr


def test_check_a_collector_file_and_its_problems(tmp_path: Path) -> None:
    ok = CliRunner().invoke(app, ["config", "check", str(ROOT / "config.collector.example.toml")])
    assert ok.exit_code == 0, ok.output
    assert "OK: collector on 0.0.0.0:8471" in ok.output
    bad = tmp_path / "collector.toml"
    bad.write_text('[collector]\nlisten = "nowhere"\nmax_body_mb = 0\n[storage]\nurl = "sqlite:///x.db"\n'
                   f'[influxdb]\nurl = "http://127.0.0.1:8086"\ntoken_file = "{tmp_path}/missing"\n')
    result = CliRunner().invoke(app, ["config", "check", str(bad)])
    assert result.exit_code == 2
    paths = [line.split(":")[0] for line in result.output.splitlines()[1:]]
    assert paths == ["collector.listen", "collector.max_body_mb"], result.output


def test_check_names_an_unreadable_token_file(tmp_path: Path) -> None:
    text = (ROOT / "config.example.toml").read_text()
    text = text.replace('[uplink]\n', '[uplink]\nurl = "http://127.0.0.1:8471"\n', 1)
    text = text.replace('url = ""\n# The token', '# The token', 1)  # the example's own url = "" line
    text = text.replace('token_file = ""\n# Or the environment variable holding it. Default "".',
                        f'token_file = "{tmp_path}/uplink.token"\n# env', 1)
    path = tmp_path / "agent.toml"
    path.write_text(text)
    result = CliRunner().invoke(app, ["config", "check", str(path)])
    assert result.exit_code == 2, result.output
    assert f"uplink.token_file: {tmp_path}/uplink.token: No such file or directory" in result.output
    (tmp_path / "uplink.token").write_text("t0ken\n")
    assert CliRunner().invoke(app, ["config", "check", str(path)]).exit_code == 0
