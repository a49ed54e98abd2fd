"""bench/owd.py at a tiny scale, both loads against a real `netprobe target --udp` on loopback: every
request answered and counted through netprobe's own client code and figures, and the paced load's
own lateness measured. Timing figures are the benchmark's business, not asserted here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
AGENTS, PPS, SECONDS = 5, 20, 1


def test_both_loads_answered_and_measured(tmp_path: Path) -> None:
    out = tmp_path / "rows.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, str(ROOT / "bench" / "owd.py"), "--agents", str(AGENTS),
                          "--pps", str(PPS), "--seconds", str(SECONDS), "--client", "both",
                          "--no-keep-awake", "--jitter-us", "50", "--json", str(out)],
                         capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode in (0, 1), run.stderr       # 1: the hold's goal missed on a busy machine
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["client"] for r in rows] == ["paced", "asyncio"]
    for r in rows:
        assert r["sent"] == r["received"] == AGENTS * PPS * SECONDS
        assert r["bad"] == r["fwd_lost"] == r["ret_lost"] == 0
        assert r["status_answered"] == AGENTS
        assert 0 <= r["hold_ms"]["p50"] <= r["hold_ms"]["p99"] <= r["hold_ms"]["max"]
        assert r["rtt_ms"]["p50"] > 0 and r["t1_skew_ms"]["p50"] >= 0
        assert r["reference"]["n"] == AGENTS * PPS * SECONDS       # the echo saw the same load
        assert r["cpu_us_per_packet"] > 0
    paced, bunched = rows
    assert paced["late_ms"]["p50"] >= 0 and bunched["late_ms"] is None
    assert "sends' lateness against their schedule" in run.stdout
