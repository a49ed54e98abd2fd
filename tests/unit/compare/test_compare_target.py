"""`netprobe compare` end to end on loopback: real `netprobe target` processes playing inference
frameworks with known prefill and per-token times (--prefill-ms, --token-ms) and a queueing server
(--slots 1); what compare measures must be what was configured."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.farend import serve_target

# Loopback adds the client's and server's own time to each figure: aiohttp's request set-up, the
# target's timers (asyncio oversleeps by up to a millisecond or two) and the JSON of each chunk.
OVERHEAD_MS = 12.0
FRAMEWORKS = {"fast": ("80", 10), "slow": ("160", 25)}      # prefill ms, token ms
QUEUE = ("50", 5)


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "250"}
    return subprocess.run([sys.executable, "-m", "netprobe.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    key = tmp_path_factory.mktemp("key") / "key"
    key.write_text("sk-loopback-secret\n")
    started = {name: serve_target("--prefill-ms", prefill, "--token-ms", str(token), "--seed", "1")
               for name, (prefill, token) in FRAMEWORKS.items()}
    started["queue"] = serve_target("--prefill-ms", QUEUE[0], "--token-ms", str(QUEUE[1]), "--slots", "1")
    started["keyed"] = serve_target("--api-key-file", str(key))
    try:
        yield {**{name: url for name, (_, url) in started.items()}, "key": str(key)}
    finally:
        for proc, _ in started.values():
            proc.terminate()
        for proc, _ in started.values():
            proc.wait(timeout=10)


def _json(*args: str) -> dict[str, Any]:
    done = _cli("compare", *args, "--json")
    assert done.returncode == 0, done.stderr
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc


def test_two_frameworks_measure_as_configured(servers: dict[str, str]) -> None:
    args = (servers["fast"], servers["slow"], "--concurrency", "1", "--requests", "8",
            "--output-tokens", "12", "--warmup", "1", "--slo-ttft-ms", "120")
    doc = _json(*args)
    fast, slow = (e["levels"][0] for e in doc["endpoints"])
    for level, (prefill, token) in ((fast, FRAMEWORKS["fast"]), (slow, FRAMEWORKS["slow"])):
        assert level["concurrency"] == 1 and level["completed"] == 8 and level["errors"] == {}
        assert float(prefill) <= level["ttft_ms"]["p50"] <= float(prefill) + OVERHEAD_MS, level["ttft_ms"]
        assert level["tpot_ms"]["p50"] == pytest.approx(token, abs=1.5), level["tpot_ms"]
        assert level["itl_ms"]["p50"] == pytest.approx(token, abs=2.5), level["itl_ms"]
        e2e = float(prefill) + 11 * token
        assert e2e <= level["e2e_ms"]["p50"] <= e2e + OVERHEAD_MS, level
        assert level["tokens_from_usage"] == 8     # the target sends usage: counts are the server's
    assert fast["goodput"] > 0 and fast["slo_met_pct"] == 100.0 and slow["slo_met_pct"] == 0.0
    # Markdown: each against the first; TTFT 160/80 = 2×, tokens/s (80+110)/(160+275) ms per request
    done = _cli("compare", *args, "--md")
    assert done.returncode == 0, done.stderr
    rows = [[c.strip() for c in line.split("|")[1:-1]] for line in done.stdout.splitlines()[2:]]
    assert rows[0][0] == servers["fast"] and rows[0][3] == rows[0][6] == "baseline"
    ttft_ratio, ttft_pct = _versus(rows[1][3])
    assert ttft_ratio == pytest.approx(2.0, abs=0.15) and ttft_pct == pytest.approx(100, abs=12)
    rate_ratio, rate_pct = _versus(rows[1][6])
    assert rate_ratio == pytest.approx(190 / 435, abs=0.05) and rate_pct == pytest.approx(-56, abs=5)


def _versus(cell: str) -> tuple[float, float]:
    m = re.fullmatch(r"([0-9.]+)× / ([+−±])([0-9]+) %", cell)
    assert m, cell
    return float(m[1]), float(m[3]) * (-1 if m[2] == "−" else 1)


def test_a_queueing_server_adds_the_wait_to_ttft(servers: dict[str, str]) -> None:
    """One slot, four requests in flight: each new request waits for the three ahead of it, so once the
    queue is full TTFT = prefill + 3 × service time (prefill + 9 × token time); throughput stays one
    service time per request whatever the concurrency."""
    doc = _json(servers["queue"], "--concurrency", "1,4", "--requests", "12", "--output-tokens", "10",
                "--warmup", "1")
    one, four = doc["endpoints"][0]["levels"]
    prefill, service = float(QUEUE[0]), float(QUEUE[0]) + 9 * QUEUE[1]
    assert prefill <= one["ttft_ms"]["p50"] <= prefill + OVERHEAD_MS, one
    # sorted TTFTs: prefill, +1, +2 service times while the queue fills, then prefill + 3 × service
    # never faster than the configured service time; a busy CPU can only stretch it (the measured rate)
    served = 1000 / four["requests_per_s"]
    assert served >= service - 2, four
    full = prefill + 3 * service
    assert full <= four["ttft_ms"]["p50"] <= prefill + 3 * served + OVERHEAD_MS, four
    assert four["ttft_ms"]["p99"] <= prefill + 3 * served + 2 * OVERHEAD_MS, four
    assert four["tpot_ms"]["p50"] == pytest.approx(QUEUE[1], abs=1.5), four   # queued before the 1st token
    assert four["output_tokens_per_s"] == pytest.approx(one["output_tokens_per_s"], rel=0.15), (one, four)



def test_rate_levels_and_the_table(servers: dict[str, str]) -> None:
    doc = _json(servers["fast"], "--rate", "20", "--burstiness", "0.5", "--requests", "10",
                "--output-tokens", "4")
    level = doc["endpoints"][0]["levels"][0]
    assert level["rate"] == 20.0 and "concurrency" not in level and level["completed"] == 10
    assert doc["burstiness"] == 0.5
    table = _cli("compare", servers["fast"], servers["slow"], "--concurrency", "2", "--requests", "4",
                 "--output-tokens", "4", "--slo-ttft-ms", "100")
    assert table.returncode == 0, table.stderr
    assert "TTFT p50" in table.stdout and "c=2" in table.stdout and "SLO TTFT ≤ 100 ms" in table.stdout
    assert "4/4" in table.stdout


def test_the_api_key_is_sent_never_shown(servers: dict[str, str], tmp_path: Path) -> None:
    ok = _cli("compare", servers["keyed"], "--requests", "2", "--output-tokens", "3",
              "--api-key-file", servers["key"], "--json")
    assert ok.returncode == 0 and json.loads(ok.stdout)["endpoints"][0]["levels"][0]["completed"] == 2
    wrong = tmp_path / "wrong"
    wrong.write_text("sk-wrong-secret")
    env_run = subprocess.run([sys.executable, "-m", "netprobe.cli", "compare", servers["keyed"], "--requests",
                              "2", "--api-key-env", "NP_TEST_KEY"], capture_output=True, text=True,
                             timeout=60,
                             env={**os.environ, "NP_TEST_KEY": "sk-wrong-secret", "COLUMNS": "250"})
    # every request refused: the endpoint's errors are in the output, and exit 1
    assert env_run.returncode == 1 and "http_401 2" in env_run.stdout, env_run.stdout
    for done in (ok, env_run):
        assert "secret" not in done.stdout + done.stderr


def test_an_endpoint_that_fails_every_request_exits_1(servers: dict[str, str], closed_port: int) -> None:
    dead = f"http://127.0.0.1:{closed_port}"
    done = _cli("compare", servers["fast"], dead, "--requests", "2", "--output-tokens", "2", "--json")
    assert done.returncode == 1
    doc = json.loads(done.stdout)
    assert doc["endpoints"][0]["levels"][0]["completed"] == 2
    assert doc["endpoints"][1]["levels"][0]["errors"] == {"connect": 2}
    md = _cli("compare", servers["fast"], dead, "--requests", "2", "--output-tokens", "2", "--md")
    assert md.returncode == 1 and "connect 2" in md.stdout


@pytest.mark.parametrize(("args", "option"), [
    (["--concurrency", "0"], "--concurrency"), (["--rate", "x"], "--rate"),
    (["--rate", "2", "--concurrency", "1"], "--concurrency and --rate"), (["--requests", "0"], "--requests"),
    (["--prompts", "/nonexistent.jsonl"], "--prompts"), (["--json", "--md"], "--json and --md"),
    (["--api-key-env", "NP_SURELY_UNSET"], "--api-key-env"), (["--extra-body", "[1]"], "--extra-body"),
    (["--burstiness", "0"], "--burstiness"), (["--slo-ttft-ms", "-1"], "--slo-ttft-ms"),
    (["--db", "sqlite:////nonexistent/x.db"], "--db"),
])
def test_bad_input_names_the_option_and_exits_2(args: list[str], option: str, closed_port: int) -> None:
    done = _cli("compare", f"http://127.0.0.1:{closed_port}", *args)
    assert done.returncode == 2 and option in done.stderr, done.stderr


def test_a_url_that_is_not_http_exits_2() -> None:
    done = _cli("compare", "ftp://example.net")
    assert done.returncode == 2 and "URL" in done.stderr
