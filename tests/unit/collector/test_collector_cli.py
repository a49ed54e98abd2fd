"""`netprobe collector …` as a user runs it (subprocesses), and the collector's configuration file."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from netprobe.config.collector import (
    CollectorConfig,
    CollectorSection,
    CollectorStorageConfig,
    DashboardSection,
    load_collector_config,
    parse_collector_config,
)
from netprobe.config.sections import InfluxConfig, LogConfig
from netprobe.errors import ConfigError
from netprobe.times import utc_now
from tests.support.pg import scratch_database
from tests.support.store import icmp_envelope

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "config.collector.example.toml"
NETPROBE = [sys.executable, "-m", "netprobe.cli"]


def netprobe(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*NETPROBE, *args], capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def conf(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    def write(url: str) -> Path:
        path = tmp_path / "collector.toml"
        path.write_text(f'[collector]\nlisten = "127.0.0.1:0"\n[storage]\nurl = "{url}"\n', encoding="utf-8")
        return path

    if request.param == "sqlite":
        yield write(f"sqlite:///{tmp_path}/collector.db")
    else:
        with scratch_database() as url:
            yield write(url)


# --- configuration --------------------------------------------------------------------------------


def test_example_parses_and_sets_every_key() -> None:
    config = load_collector_config(EXAMPLE)
    assert config.collector.address() == ("0.0.0.0", 8471)
    assert config.collector.max_body_bytes == 16 << 20 and config.collector.max_batch == 5000
    raw: dict[str, Any] = tomllib.loads(EXAMPLE.read_text(encoding="utf-8"))
    assert set(raw) == set(CollectorConfig.model_fields)
    for name, model in (("collector", CollectorSection), ("storage", CollectorStorageConfig),
                        ("influxdb", InfluxConfig), ("log", LogConfig), ("dashboard", DashboardSection)):
        missing = set(model.model_fields) - set(raw[name])
        assert not missing, f"[{name}] misses {missing}"


def test_defaults() -> None:
    c = parse_collector_config('[storage]\nurl = "sqlite:///x.db"\n')
    assert (c.collector.listen, c.collector.max_body_mb, c.collector.max_batch, c.collector.grace) == \
        ("0.0.0.0:8471", 16, 5000, 5.0)
    assert c.storage.retention == 14 * 86400 and not c.influxdb.url and c.log.level == "info"


@pytest.mark.parametrize(("text", "problem"), [
    ('[collector]\nlisten = "0.0.0.0"\n', "collector.listen: missing port"),
    ('[collector]\nlisten = "0.0.0.0:99999"\n', "collector.listen:"),
    ('[collector]\nlisten = 8471\n', "collector.listen: Input should be a valid string"),
    ('[collector]\nlisen = "0.0.0.0:8471"\n', "collector.lisen: unknown key; allowed: listen, max_body_mb"),
    ('[collector]\nmax_body_mb = "16"\n', "collector.max_body_mb: Input should be a valid integer"),
    ('[collector]\nmax_body_mb = 0\n', "collector.max_body_mb: Input should be greater than or equal to 1"),
    ('[collector]\nmax_batch = 0\n', "collector.max_batch:"),
    ('[collector]\ngrace = "soon"\n', "collector.grace: 'soon' is not a duration"),
    ('[storage]\nurl = "not a url"\n', "storage.url: 'not a url' is not a SQLAlchemy URL"),
    ('[storage]\nurl = ""\n', "storage.url: must not be empty"),
    ('[storage]\n', "storage.url: required key is missing"),
    ('[influxdb]\nurl = "ftp://x"\n', "influxdb.url: 'ftp://x' is not an http"),
    ('[log]\nlevel = "loud"\n', "log.level: Input should be"),
    ('[agent]\nid = "x"\n', "agent: unknown section or key; allowed: collector, storage, influxdb, log"),
    ("[collector\n", "line 1, column 11: invalid TOML"),
    ('[dashboard]\nprefix = "netprobe/"\n', 'dashboard.prefix: must start and end with "/"'),
    ('[dashboard]\nprefix = "/netprobe"\n', 'dashboard.prefix: must start and end with "/"'),
    ('[dashboard]\nprefix = "/a//b/"\n', "dashboard.prefix: path segments may hold only"),
    ('[dashboard]\nprefix = "/metrics/"\n', "dashboard.prefix: '/metrics/' would overlap"),
    ('[dashboard]\nenabled = "yes"\n', "dashboard.enabled: Input should be a valid boolean"),
])
def test_config_problems_name_the_field(text: str, problem: str) -> None:
    if "[storage]" not in text and "invalid TOML" not in problem:
        text += '[storage]\nurl = "sqlite:///x.db"\n'
    with pytest.raises(ConfigError) as err:
        parse_collector_config(text, source="c.toml")
    assert any(p.startswith(problem) for p in err.value.problems), err.value.problems
    assert err.value.exit_code == 2


def test_missing_storage_section() -> None:
    with pytest.raises(ConfigError) as err:
        parse_collector_config('[collector]\nlisten = "127.0.0.1:8471"\n')
    assert err.value.problems == ["storage: missing section [storage]"]


def test_listen_forms() -> None:
    def address(listen: str) -> tuple[str, int]:
        return parse_collector_config(f'[collector]\nlisten = "{listen}"\n[storage]\nurl = "sqlite://"\n') \
            .collector.address()

    assert address("127.0.0.1:0") == ("127.0.0.1", 0)
    assert address("[::1]:8471") == ("::1", 8471)
    assert address("localhost:8471") == ("localhost", 8471)


def test_cli_config_error_exits_2_naming_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[collector]\nmax_batch = "lots"\n[storage]\nurl = "sqlite:///x.db"\n', encoding="utf-8")
    for args in (["run"], ["add-agent", "a1"], ["list-agents"], ["revoke-agent", "a1"]):
        run = netprobe("collector", *args, "--config", str(bad))
        assert run.returncode == 2, run.stderr
        assert "collector.max_batch" in run.stderr
    run = netprobe("collector", "run", "--config", str(tmp_path / "missing.toml"))
    assert run.returncode == 2 and "file not found" in run.stderr


# --- tokens from the command line -----------------------------------------------------------------


def test_add_list_revoke(conf: Path) -> None:
    run = netprobe("collector", "add-agent", "sh-ct-1", "--config", str(conf))
    assert run.returncode == 0, run.stderr
    token = run.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"[A-Za-z0-9_-]{43}", token) and "issued" in run.stderr
    again = netprobe("collector", "add-agent", "sh-ct-1", "--config", str(conf))
    assert again.returncode == 0 and "rotated" in again.stderr
    assert again.stdout.strip().splitlines()[-1] != token
    assert netprobe("collector", "add-agent", "bj-cu-1", "--config", str(conf)).returncode == 0

    listed = netprobe("collector", "list-agents", "--config", str(conf), "--json")
    assert listed.returncode == 0, listed.stderr
    agents = json.loads(listed.stdout)["agents"]
    assert [a["id"] for a in agents] == ["bj-cu-1", "sh-ct-1"]
    assert set(agents[0]) == {"id", "created_at", "revoked_at", "last_used_at"}
    assert agents[1]["revoked_at"] is None and agents[1]["last_used_at"] is None
    assert token not in listed.stdout

    revoked = netprobe("collector", "revoke-agent", "sh-ct-1", "--config", str(conf))
    assert revoked.returncode == 0 and "revoked" in revoked.stdout
    twice = netprobe("collector", "revoke-agent", "sh-ct-1", "--config", str(conf))
    assert twice.returncode == 0 and "already revoked" in twice.stdout
    table = netprobe("collector", "list-agents", "--config", str(conf))
    assert table.returncode == 0 and "sh-ct-1" in table.stdout and "never" in table.stdout
    listed = netprobe("collector", "list-agents", "--config", str(conf), "--json")
    agents = json.loads(listed.stdout)["agents"]
    assert agents[1]["revoked_at"] is not None and agents[0]["revoked_at"] is None

    unknown = netprobe("collector", "revoke-agent", "nobody", "--config", str(conf))
    assert unknown.returncode == 2 and "nobody" in unknown.stderr and "no token" in unknown.stderr
    bad_id = netprobe("collector", "add-agent", "not valid!", "--config", str(conf))
    assert bad_id.returncode == 2 and "AGENT_ID" in bad_id.stderr


# --- collector run --------------------------------------------------------------------------------


def _post(url: str, token: str, body: bytes) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(f"{url}/api/v1/results", data=body, method="POST", headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture
def running(conf: Path) -> Iterator[tuple[subprocess.Popen[str], str, str]]:
    """(process, base URL, sh-ct-1's token) of `netprobe collector run` on an ephemeral port."""
    added = netprobe("collector", "add-agent", "sh-ct-1", "--config", str(conf))
    token = added.stdout.strip().splitlines()[-1]
    proc = subprocess.Popen([*NETPROBE, "collector", "run", "--config", str(conf)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 30
        url = ""
        for line in proc.stderr:
            m = re.search(r"msg=\"collector listening\" url=(http://\S+)", line)
            if m:
                url = m.group(1)
                break
            assert time.monotonic() < deadline, "collector did not start"
        assert url, f"collector exited: {proc.wait(timeout=5)}"
        yield proc, url, token
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def test_run_serves_and_exits_cleanly_on_sigterm(running: tuple[subprocess.Popen[str], str, str]) -> None:
    proc, url, token = running
    with urllib.request.urlopen(f"{url}/healthz", timeout=10) as resp:
        assert json.loads(resp.read()) == {"status": "ok"}
    now = utc_now()
    envs = [icmp_envelope(now, [10.0, 11.0], result_id=f"run-{i}") for i in range(3)]
    assert _post(url, token, json.dumps(envs).encode()) == \
        (200, {"accepted": 3, "duplicates": 0, "expired": 0})
    assert _post(url, token, json.dumps(envs).encode())[1]["duplicates"] == 3
    assert _post(url, "wrong", b"[]")[0] == 401
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    assert 'netprobe_collector_results_accepted_total{agent="sh-ct-1"} 3.0' in text
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert time.monotonic() - t0 < 5
    assert "collector stopped" in err and token not in err and "wrong" not in err


def test_run_setup_errors_exit_2(tmp_path: Path, listener: int) -> None:
    db = f"sqlite:///{tmp_path}/c.db"
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[collector]\nlisten = "127.0.0.1:0"\n[storage]\nurl = "{db}"\n'
                   f'[influxdb]\nurl = "http://127.0.0.1:1"\ntoken_file = "{tmp_path}/missing.token"\n')
    run = netprobe("collector", "run", "--config", str(cfg))
    assert run.returncode == 2 and "influxdb.token_file" in run.stderr
    cfg.write_text(f'[collector]\nlisten = "127.0.0.1:{listener}"\n[storage]\nurl = "{db}"\n')
    run = netprobe("collector", "run", "--config", str(cfg))
    assert run.returncode == 2 and "collector.listen" in run.stderr and "in use" in run.stderr
