"""The agent daemon as a process: schedules, stores, drains on SIGTERM, reloads on SIGHUP."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from netprobe.agent.scheduler import spread_offset
from netprobe.store import open_store
from tests.support.agent import CONFIG, PORT, Daemon, _scrape, _write

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="raw ICMP sockets need root")


async def _rows(db: Path, target: str | None = None) -> list[dict[str, object]]:
    store = await open_store(f"sqlite:///{db}", upgrade=False)
    try:
        return [r.envelope.raw for r in await store.results("t-agent", target)]
    finally:
        await store.close()


def test_agent_stores_rounds_and_drains_on_sigterm(tmp_path: Path) -> None:
    db, cfg = tmp_path / "a.db", tmp_path / "agent.toml"
    _write(cfg, db, PORT)
    agent = Daemon(cfg)
    time.sleep(3.0)
    code, stop_s, err = agent.stop()
    assert code == 0, err
    assert stop_s < 5.0
    assert "agent stopped" in err and "Traceback" not in err and "raised an exception" not in err
    assert "cancelled_rounds=0" in err, "rounds shorter than the drain grace finish, not cancelled"
    rows = asyncio.run(_rows(db))
    by_target: dict[str, list[dict[str, object]]] = {}
    for env in rows:
        by_target.setdefault(str(env["target"]["id"]), []).append(env)  # type: ignore[index]
    assert {"lo4", "lo6", "nowhere"} <= set(by_target)
    lo4_icmp = [e for e in by_target["lo4"] if e["probe"] == "icmp"]
    assert lo4_icmp and all(e["result"]["status"] == "ok" for e in lo4_icmp)  # type: ignore[index]
    assert any(e["probe"] == "tcp" and e["result"]["status"] == "ok" for e in by_target["lo4"])  # type: ignore[index]
    # a name that does not resolve is data, not a crash
    bad = by_target["nowhere"][0]["result"]
    assert bad["status"] == "error" and bad["error_kind"] == "dns"  # type: ignore[index]
    # every envelope carries the agent block of docs/api.md
    assert rows[0]["agent"] == {"id": "t-agent", "region": "test", "isp": "lo", "timezone": "Asia/Shanghai"}


def test_agent_sets_its_timer_slack_from_the_config_and_its_intervals(tmp_path: Path) -> None:
    """[agent] timer_slack defaults to 20 ms, capped at a tenth of the shortest interval: 50 ms here."""
    db, cfg = tmp_path / "a.db", tmp_path / "agent.toml"
    _write(cfg, db, PORT)
    agent = Daemon(cfg)
    try:
        slack_ns = int(Path(f"/proc/{agent.proc.pid}/timerslack_ns").read_text())
    finally:
        code, _, err = agent.stop()
    assert code == 0, err
    assert slack_ns == 5_000_000
    assert "timer_slack_ms=5.0" in err


def test_sighup_reload_keeps_old_config_on_error_and_applies_good_one(tmp_path: Path) -> None:
    port = PORT
    db, cfg = tmp_path / "a.db", tmp_path / "agent.toml"
    _write(cfg, db, port)
    agent = Daemon(cfg)
    try:
        cfg.write_text("[agent]\nid = 'x'\nbogus = 1\n")
        agent.proc.send_signal(signal.SIGHUP)
        time.sleep(1.5)
        assert agent.proc.poll() is None, "a bad reload must not stop the agent"
        _write(cfg, db, port, extra='\n[[targets]]\nid = "added"\nhost = "127.0.0.2"\nprobes = ["icmp"]\n')
        agent.proc.send_signal(signal.SIGHUP)
        time.sleep(2.5)
    finally:
        code, _, err = agent.stop()
    assert code == 0
    assert "reload failed" in err and "agent.bogus" in err
    assert "configuration reloaded" in err
    assert asyncio.run(_rows(db, "added")), "the target added by the reload was probed"


def test_agent_bad_config_exits_2_naming_the_field(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text("[agent]\nid = 'a'\nregion = 'r'\nisp = 'i'\ntimezone = 'Mars/Base'\n[[targets]]\n"
                   "id = 't'\nhost = '127.0.0.1'\nprobes = ['icmp']\n")
    proc = subprocess.run([sys.executable, "-m", "netprobe.cli", "agent", "run", "--config", str(cfg)],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert "agent.timezone" in proc.stderr and "Traceback" not in proc.stderr


def test_sigterm_cancels_a_long_round_and_still_exits_within_5s(tmp_path: Path) -> None:
    db, cfg = tmp_path / "a.db", tmp_path / "agent.toml"
    text = CONFIG.format(db=db, port=PORT, extra="")
    text = text.replace('every = "1s"\ncount = 3\n', 'every = "11s"\ncount = 200\n')  # 10.45 s rounds
    cfg.write_text(text)
    agent = Daemon(cfg)
    # first runs are spread by a stable hash of the job id: wait until lo4's first round is under way
    time.sleep(spread_offset("lo4:icmp", 11.0) + 1.0)
    code, stop_s, err = agent.stop()
    assert code == 0, err
    assert stop_s < 5.0
    assert "raised an exception" not in err and "Traceback" not in err
    assert "cancelled_rounds=0" not in err  # a 10 s round cannot finish inside the drain grace
    assert "cancelled_rounds=" in err


def test_prometheus_exporter_serves_what_the_rounds_measured(tmp_path: Path) -> None:
    db, cfg = tmp_path / "m.db", tmp_path / "agent.toml"
    _write(cfg, db, PORT, '\n[metrics]\nlisten = "127.0.0.1:19470"\n')
    daemon = Daemon(cfg)
    try:
        time.sleep(3.5)
        samples = _scrape(daemon.proc.pid, 19470)
    finally:
        code, _, log = daemon.stop()
    assert code == 0, log

    def value(name: str, **labels: str) -> float:
        hits = [v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= set(ls)]
        assert len(hits) == 1, (name, labels, hits)
        return hits[0]

    # The histogram against the stored rounds: a job's rounds finish in order, so the first rounds
    # whose replies add up to the scraped count are exactly the ones observed; their samples, in
    # seconds, must fill the buckets (a unit slip would put 0.05 ms echoes above 1 s).
    observed = int(value("netprobe_rtt_seconds_count", target="lo4", probe="icmp"))
    assert observed >= 3
    rtts: list[float] = []
    for env in (e for e in asyncio.run(_rows(db, "lo4")) if e["probe"] == "icmp"):
        if len(rtts) >= observed:
            break
        rtts += [v for v in env["result"]["samples_ms"] if v is not None]  # type: ignore[index]
    assert len(rtts) == observed
    for le in ("0.001", "0.002", "0.005", "+Inf"):
        assert value("netprobe_rtt_seconds_bucket", target="lo4", probe="icmp", le=le) == \
            sum(ms / 1000 <= float(le) for ms in rtts), (le, rtts)
    assert value("netprobe_rtt_seconds_sum", target="lo4", probe="icmp") == pytest.approx(sum(rtts) / 1000)
    assert value("netprobe_rtt_seconds_count", target="lo4", probe="tcp") >= 2
    assert value("netprobe_loss_ratio", target="lo4", probe="icmp") == 0.0
    assert value("netprobe_probe_errors_total", target="nowhere", probe="icmp", kind="dns") >= 1
    assert value("netprobe_rounds_total", target="lo6", probe="icmp", status="ok") >= 1
    assert value("netprobe_sink_written_total", sink="store") >= 1
    assert value("netprobe_sink_queue_depth", sink="store") >= 0


def test_metrics_listen_must_be_host_port(tmp_path: Path) -> None:
    cfg = tmp_path / "agent.toml"
    _write(cfg, tmp_path / "x.db", PORT, '\n[metrics]\nlisten = "127.0.0.1"\n')
    out = subprocess.run([sys.executable, "-m", "netprobe.cli", "config", "check", str(cfg)],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and "metrics.listen" in (out.stdout + out.stderr)


def test_round_log_fields_of_an_sse_round() -> None:
    """sse's connect_ms is one number, not RTT statistics: the round's log line must not raise."""
    from netprobe.agent.daemon import round_fields

    body = {"status": "ok", "connect_ms": 12.5, "loss_pct": 0.0, "first_event_ms": 40.1}
    assert round_fields(body) == {"status": "ok", "loss_pct": 0.0}
    tcp = {"status": "ok", "connect_ms": {"p50": 1.23456, "p95": 2.5}}
    assert round_fields(tcp) == {"status": "ok", "p50_ms": 1.235, "p95_ms": 2.5}
