"""`netprobe demo` end to end, as an operator runs it: the lab, the real agent through a compressed
day, then report, budget and alerts; and the lab comes down when it is interrupted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from netprobe.lab import api
from netprobe.lab.topology import existing_lab_namespaces

pytestmark = pytest.mark.lab

CLI = [sys.executable, "-m", "netprobe.cli"]
ENV = {**os.environ, "COLUMNS": "250"}


def test_demo_runs_end_to_end_and_cleans_up(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    done = subprocess.run([*CLI, "demo", "--out", str(out)], capture_output=True, text=True, timeout=400,
                          env=ENV)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    text = done.stdout
    assert "Traceback" not in done.stderr
    for heading in ("1. the lab", "2. the agent", "3. the evening peak", "4. the budget", "5. alerts"):
        assert heading in text
    assert "Time compressed" in text                                # the report says so
    assert api.current() is None and not existing_lab_namespaces()   # the lab is down

    # the report, from the database the demo leaves behind
    report = json.loads(subprocess.run([*CLI, "report", "peak", "--db", f"sqlite:///{out / 'demo.db'}",
                                        "--days", "2", "--format", "json"], capture_output=True, text=True,
                                       timeout=120, check=True).stdout)
    rows = {r["target"]: r for r in report["rows"]}
    assert len(rows) == 10
    for target, row in rows.items():
        assert row["peak"]["rounds"] > 0 and row["offpeak"]["rounds"] > 0, target
    # premium lines hold at the peak; the 163 lines degrade (lab figures: agents/lab.toml)
    assert rows["us-163"]["peak"]["rtt_p95_ms"] > rows["us-163"]["offpeak"]["rtt_p95_ms"] + 50
    assert rows["us-163"]["peak"]["loss_pct"] > rows["us-163"]["offpeak"]["loss_pct"]
    assert abs(rows["hk-cn2"]["peak"]["rtt_p50_ms"] - 37.0) < 3.0     # 35 ms base, 37 ms peak
    assert rows["hk-cn2"]["rank"] < rows["hk-bgp"]["rank"] and rows["us-cn2"]["rank"] < rows["us-163"]["rank"]
    assert rows["us-163"]["detected_line"] == "163"

    # the streams, both modes: the emitter's stalls and delay variation on each datacenter's first route,
    # the OpenAI-style server's first token (150 ms P50 configured) on the others
    hk = rows["hk-cn2"]
    assert hk["peak"]["sse_delay_var_p95_ms"] is not None and hk["stalls_per_min"] is not None
    served = rows["hk-bgp"]["peak"]["sse_server_first_ms"]
    assert served is not None and 120 < served < 300, served
    assert all(r["sse_first_event_p95_ms"] is not None for r in rows.values())

    # attainment next to the arithmetic: the share of requests within 1 s, with the servers' known time
    assert "SLO: first token within 1000 ms" in text and "Worst case, P95s added" in text
    assert report["rows"] and all(r["attainment_pct"] is not None for r in report["rows"])
    assert rows["hk-cn2"]["attainment_pct"] > 90 > rows["us-163"]["attainment_pct"]

    # the budget: the ordinary US-West line leaves the GPU nothing of 1 s at the peak
    assert "over: network" in text
    worst_case = text[text.index("Worst case, P95s added"):]
    budget_line = next(ln for ln in worst_case.splitlines() if "│ us-163" in ln)
    assert "over: network" in budget_line

    # the alert on the ordinary US-West line fired for the evening window
    alerts = text[text.index("5. alerts"):]
    fired = [ln for ln in alerts.splitlines() if "[FIRING] peak-loss" in ln and "us-163" in ln]
    assert any("23:00" in ln for ln in fired), alerts

    page = (out / "report.html").read_text()
    assert "Time compressed" in page and "<svg" in page


def test_an_interrupted_demo_still_takes_the_lab_down(tmp_path: Path) -> None:
    proc = subprocess.Popen([*CLI, "demo", "--out", str(tmp_path / "demo")], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=ENV)
    assert proc.stdout is not None
    seen = ""
    deadline = time.monotonic() + 120
    while "02:00" not in seen and time.monotonic() < deadline:
        seen += proc.stdout.readline()
    assert "02:00" in seen, seen
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, seen + rest
    assert api.current() is None and not existing_lab_namespaces()
    left = subprocess.run(["pgrep", "-f", str(tmp_path / "demo" / "agent.toml")], capture_output=True)
    assert left.returncode == 1, left.stdout  # no agent left running
