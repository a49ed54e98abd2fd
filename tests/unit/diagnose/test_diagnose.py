"""`netprobe diagnose`: the verdict decision table by hand, then end to end on loopback against the real
`netprobe target` (emitter and OpenAI fake), a queueing OpenAI-style server, and a stored database.
All traffic stays on 127.0.0.1 (raw ICMP there needs root, which the test machine has)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from netprobe.budget.compute import BudgetParams
from netprobe.diagnose.run import diagnose
from netprobe.diagnose.steps import (
    LiveSettings,
    NetworkFloor,
    SingleRequest,
    Sweep,
    SweepLevel,
    live_floor,
)
from netprobe.diagnose.verdict import decide
from netprobe.errors import SetupError
from netprobe.farend.server import make_app, start
from netprobe.probes.icmp.runtime import IcmpResult
from netprobe.probes.results import envelope
from netprobe.probes.sse.runtime import SseSettings
from netprobe.stats import jitter, loss_pct, rtt_stats
from tests.support.store import typed

FAST_LIVE = LiveSettings(count=3, interval=0.05, timeout=0.5, cycles=1, cycle_interval=0.1, tcp_count=3)


# -- the decision table, by hand ----------------------------------------------------------------------
def net(floor: float | None = 30.0, p50: float | None = 28.0, **kw: Any) -> NetworkFloor:
    return NetworkFloor(source="live", method="icmp", host="gpu.example", floor_ms=floor, rtt_p50_ms=p50,
                        loss_pct=0.0, samples=20, **kw)


def single(first: float = 200.0, ttfb: float = 40.0, *, status: str = "ok", tpot: float | None = 20.0,
           gap_p95: float | None = 25.0, stalls: int = 0, http_status: int | None = 200,
           error_kind: str | None = None) -> SingleRequest:
    ok = status == "ok"
    gaps = {"p50": 20.0, "p95": gap_p95 or 0.0} if ok else None
    return SingleRequest(mode="openai", status=status, error_kind=error_kind,
                         error="boom" if not ok else None, http_status=http_status, connect_ms=30.0,
                         ttfb_ms=ttfb if ok else None, first_event_ms=first if ok else None,
                         server_ms=first - ttfb if ok else None, tpot_ms=tpot if ok else None, gaps_ms=gaps,
                         stalls=stalls, stall_ms_total=400.0 * stalls, events=64 if ok else 0, duration_s=2.0,
                         delay_var_p95_ms=None, completed=ok)


def level(n: int, ttft_p95: float | None, *, errors: int = 0, tpot_p95: float | None = 20.0) -> SweepLevel:
    return SweepLevel(concurrency=n, ttft_p50_ms=ttft_p95, ttft_p95_ms=ttft_p95, tpot_p50_ms=tpot_p95,
                      tpot_p95_ms=tpot_p95, errors=errors, error_kinds={"http_503": errors} if errors else {})


FLAT = Sweep(levels=(level(1, 200.0), level(2, 210.0), level(4, 230.0), level(8, 260.0)))
P = BudgetParams(ttft_ms=1000)


def test_within_budget() -> None:
    v = decide(net(), single(), FLAT, P)
    assert v.segment is None and v.within_budget and v.message.startswith("within budget")
    assert v.budget is not None and v.budget.network_ms == 90.0 and v.budget.jitter_margin_ms == 2.0
    assert v.budget.gpu_budget_ms == pytest.approx(1000 - 90 - 2)
    assert "up to 8 concurrent" in v.message and all(not c.over for c in v.levels)
    assert v.to_dict() == {"segment": None, "message": v.message, "advice": "", "level": None,
                           "within_budget": True, "attainment_pct": None}   # no RTT samples: no attainment


def test_the_verdict_gives_the_attainment_from_the_rtt_samples_loss_and_server_share() -> None:
    # 3 round trips of 30 ms and a 160 ms server share: 250 ms, far within 1 s...
    samples = tuple((30.0, 1.0) for _ in range(20))
    v = decide(net(rtt_dist=samples), single(), FLAT, P)
    assert v.segment is None and v.attainment_pct == pytest.approx(100.0)
    assert "100.0 % of requests within 1000 ms (attainment)" in v.message
    # ...but 5 % loss: a lost SYN waits 1 s, so those requests miss — which the P95 arithmetic never sees
    lossy = replace(net(rtt_dist=samples), loss_pct=5.0)
    got = decide(lossy, single(), FLAT, P)
    assert got.segment is None                              # the worst-case arithmetic still fits
    assert got.attainment_pct == pytest.approx(100 * 0.95, abs=0.05)   # a data-trip loss still fits 1 s
    assert got.to_dict()["attainment_pct"] == got.attainment_pct


def test_network_when_the_route_alone_spends_the_budget() -> None:
    v = decide(net(400.0, 300.0), single(first=900.0, ttfb=420.0), FLAT, P)
    assert v.segment == "network" and v.message.startswith("network: the route alone spends the budget")
    assert "CN2 GIA" in v.advice and "keep-alive" in v.advice
    assert "would leave" in v.advice      # 400 + 100 margin < 1000 on a warm connection
    # exactly spent counts too (network + margin ≥ ttft), and the network rule comes before the others
    exact = decide(net(300.0, 200.0), single(first=5000.0), FLAT, BudgetParams(ttft_ms=1000))
    assert exact.budget is not None and exact.budget.gpu_budget_ms == 0 and exact.segment == "network"
    # keep-alive and TLS 1.2 change the round trips the rule counts
    warm = BudgetParams(ttft_ms=1000, keepalive=True)
    assert decide(net(300.0, 290.0), single(), FLAT, warm).segment is None
    assert decide(net(250.0, 250.0), single(first=60.0, ttfb=40.0), FLAT,
                  BudgetParams(ttft_ms=1000, tls="1.2")).segment == "network"     # 4 × 250 ≥ 1000
    assert decide(net(250.0, 250.0), single(first=60.0, ttfb=40.0), FLAT, P).segment is None  # 3 × 250


def test_gpu_when_one_request_is_over() -> None:
    v = decide(net(), single(first=1000.0, ttfb=40.0), FLAT, P)   # server share 960 > 908
    assert v.segment == "gpu" and v.message.startswith("model/framework: one request's prefill/first token")
    assert "960 ms" in v.message and "908 ms GPU budget" in v.message
    assert "prompt caching" in v.advice and "faster framework" in v.advice
    # calls in series multiply both the network and the server share
    calls = decide(net(), single(first=340.0, ttfb=40.0), FLAT, BudgetParams(ttft_ms=1000, calls=3))
    assert calls.segment == "gpu" and "× 3 calls" in calls.message   # 900 > 1000 − 270 − 6


def test_capacity_names_the_first_level_that_breaks() -> None:
    queueing = Sweep(levels=(level(1, 210.0), level(2, 400.0), level(4, 1100.0), level(8, 2200.0)))
    v = decide(net(), single(first=200.0, ttfb=40.0), queueing, P)
    assert v.segment == "capacity" and v.level == 4
    assert v.message.startswith("capacity: TTFT climbs with concurrency (queueing): at 4 concurrent streams")
    assert "more replicas" in v.advice and "max batch" in v.advice
    est = {c.concurrency: c.server_est_ms for c in v.levels}
    assert est[2] == pytest.approx(160 + 200) and est[4] == pytest.approx(160 + 900)
    assert [c.over for c in v.levels] == [False, False, True, True]
    # errors at a level break it too
    failing = Sweep(levels=(level(1, 200.0), level(2, 210.0), level(8, 260.0, errors=3)))
    v = decide(net(), single(), failing, P)
    assert v.segment == "capacity" and v.level == 8 and "3 of 8 streams failed (http_503 3)" in v.message


def test_tpot_with_a_target() -> None:
    slow = single(tpot=45.0, gap_p95=60.0)
    assert decide(net(), slow, FLAT, P).segment is None                       # no --tpot-ms: not checked
    v = decide(net(), slow, FLAT, BudgetParams(ttft_ms=1000, tpot_ms=30))
    assert v.segment == "tpot" and "TPOT 45 ms" in v.message and "gap P95 60 ms" in v.message
    stalls = decide(net(), single(stalls=2), FLAT, BudgetParams(ttft_ms=1000, tpot_ms=30))
    assert stalls.segment == "tpot" and "2 stalls" in stalls.message
    batch = Sweep(levels=(level(1, 200.0), level(4, 220.0, tpot_p95=35.0)))
    v = decide(net(), single(), batch, BudgetParams(ttft_ms=1000, tpot_ms=30))
    assert v.segment == "tpot" and v.level == 4 and "TPOT P95 35 ms at 4 concurrent" in v.message
    # capacity (TTFT) is decided before streaming speed
    both = Sweep(levels=(level(1, 200.0), level(4, 2000.0, tpot_p95=35.0)))
    assert decide(net(), single(), both, BudgetParams(ttft_ms=1000, tpot_ms=30)).segment == "capacity"


def test_failed_url_and_no_floor() -> None:
    v = decide(net(), single(status="down", error_kind="connect", http_status=None), Sweep(skipped="x"), P)
    assert v.segment == "failed" and not v.within_budget and "the URL failed (connect)" in v.message
    assert "gpu.example answers" in v.advice       # the host answered step 1: the port is the problem
    auth = decide(net(), single(status="down", error_kind="http_401", http_status=401), Sweep(), P)
    assert auth.segment == "failed" and "--api-key-file" in auth.advice
    nofloor = decide(net(None, None, error="no TCP connect succeeded"), single(), FLAT, P)
    assert nofloor.segment == "failed" and "no network floor" in nofloor.message and nofloor.budget is None


def test_stored_sse_delay_variation_sets_the_margin() -> None:
    stored = replace(net(100.0, 60.0), source="stored", method="peak", delay_var_p50_ms=1.0,
                     delay_var_p95_ms=6.0)
    v = decide(stored, single(), FLAT, P)
    assert v.budget is not None and (v.budget.jitter_margin_ms, v.budget.jitter_source) == (5.0, "sse")


# -- end to end on loopback ---------------------------------------------------------------------------
@pytest.fixture
async def target() -> AsyncIterator[str]:
    runner = await start(make_app(), "127.0.0.1", 0, grace=0.5)
    yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    await runner.cleanup()


async def cli(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    """`python -m netprobe.cli diagnose …` without blocking the loop the servers run on; no agent DB."""
    env = {**os.environ, "STATE_DIRECTORY": str(tmp_path / "state"), "COLUMNS": "200"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "netprobe.cli", "diagnose", *args, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout=120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_fast_emitter_is_within_budget_with_a_live_floor(target: str, tmp_path: Path) -> None:
    sse = f"{target}/sse?count=5&interval_ms=5"
    code, out, err = await cli(tmp_path, sse, "--concurrency", "1,2", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert set(doc) >= {"url", "network", "single", "sweep", "budget", "verdict"}
    n = doc["network"]
    assert n["source"] == "live" and n["method"] == "icmp" and "not the evening peak" in n["description"]
    assert 0 < n["floor_ms"] < 5 and n["loss_pct"] == 0.0 and n["line"] == "other" and n["path_loss_pct"] == 0
    assert doc["single"]["ok"] and doc["single"]["events"] == 5 and doc["single"]["first_event_ms"] < 200
    assert [lv["concurrency"] for lv in doc["sweep"]["levels"]] == [1, 2]
    assert all(lv["errors"] == 0 and lv["over_budget"] is False for lv in doc["sweep"]["levels"])
    b = doc["budget"]
    assert {"network_ms", "jitter_margin_ms", "gpu_budget_ms", "round_trips", "calls"} <= set(b)
    assert b["round_trips"] == 3 and b["calls"] == 1 and b["network_ms"] == pytest.approx(3 * n["floor_ms"])
    assert doc["verdict"]["segment"] is None and doc["verdict"]["message"].startswith("within budget")
    assert err == ""
    # the same for people: three numbered sections, then the verdict
    code, out, err = await cli(tmp_path, sse, "--concurrency", "1")
    assert code == 0, err
    for heading in ("1. Network floor", "2. Single request", "3. Concurrency sweep", "Budget", "Verdict:"):
        assert heading in out
    assert "now, not the evening peak" in out and "within budget" in out


async def test_openai_think_time_over_the_gpu_budget_is_gpu(target: str, tmp_path: Path) -> None:
    code, out, err = await cli(tmp_path, f"{target}/v1/chat/completions", "--ttft-ms", "500",
                               "--extra-body", '{"think_ms": 700, "interval_ms": 5}', "--max-tokens", "5",
                               "--concurrency", "1,2", "--json")
    assert code == 1, err
    doc = json.loads(out)
    assert doc["mode"] == "openai"    # from the path
    s = doc["single"]
    assert s["ok"] and s["server_ms"] >= 690 and s["tpot_ms"] < 50
    assert s["server_ms"] == pytest.approx(s["first_event_ms"] - s["ttfb_ms"])
    assert doc["verdict"]["segment"] == "gpu" and "model/framework" in doc["verdict"]["message"]


def queueing_app(hold_s: float) -> web.Application:
    """An OpenAI-style server with one "GPU": each request holds the lock for `hold_s` before streaming."""
    gpu = asyncio.Lock()

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)   # headers at once, as vLLM does: the wait shows in the first token
        async with gpu:
            await asyncio.sleep(hold_s)

        def chunk(delta: dict[str, Any]) -> bytes:
            obj = {"id": "q", "object": "chat.completion.chunk", "model": body["model"],
                   "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
            return f"data: {json.dumps(obj)}\n\n".encode()

        await resp.write(chunk({"role": "assistant", "content": ""}))
        for i in range(3):
            await resp.write(chunk({"content": f"t{i} "}))
            await asyncio.sleep(0.005)
        await resp.write(b"data: [DONE]\n\n")
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    return app


async def test_ttft_growing_with_concurrency_is_capacity() -> None:
    runner = await start(queueing_app(0.15), "127.0.0.1", 0)
    try:
        url = f"http://127.0.0.1:{runner.addresses[0][1]}/v1/chat/completions"
        settings = SseSettings(mode="openai", timeout=10, every=10**7)
        d = await diagnose(url, settings, BudgetParams(ttft_ms=500), [1, 2, 4, 8], live=FAST_LIVE)
    finally:
        await runner.cleanup()
    assert d.network.source == "live" and d.single.ok
    assert d.single.server_ms is not None and 140 < d.single.server_ms < 300
    # one holder at a time: 4 at once queue up to ~4 × 150 ms, past the ~500 ms budget; 2 still fit
    assert d.verdict.segment == "capacity" and d.verdict.level == 4, d.verdict.message
    assert "at 4 concurrent streams" in d.verdict.message
    assert [c.over for c in d.verdict.levels] == [False, False, True, True]
    assert d.to_dict()["sweep"]["levels"][2]["over_budget"] is True


def _peak_envelopes(host: str, rtts: list[float], days: int = 3) -> list[dict[str, Any]]:
    """icmp rounds at 20:10, 21:10, 22:10 Shanghai time on each of the last `days` days before today."""
    agent = {"id": "sh-ct-1", "region": "cn-east", "isp": "telecom", "timezone": "Asia/Shanghai"}
    tgt = {"id": "local-gpu", "host": host, "datacenter": "us-west", "line": "163"}
    today = (datetime.now(UTC) + timedelta(hours=8)).date()
    envs = []
    for back in range(1, days + 1):
        day = today - timedelta(days=back)
        for hour in (20, 21, 22):
            ts = datetime(day.year, day.month, day.day, hour, 10, tzinfo=UTC) - timedelta(hours=8)
            n = len(rtts)
            r = IcmpResult(probe="icmp", host=host, started_at=ts, address=host, status="ok", sent=n,
                           received=n, loss_pct=loss_pct(n, n), rtt_ms=rtt_stats(rtts),
                           jitter_ms=jitter(list(rtts)), samples_ms=list(rtts))
            envs.append(envelope(r, agent, tgt))
    return envs


async def _write_db(path: Path, envs: list[dict[str, Any]]) -> str:
    from netprobe.store.store import open_store

    url = f"sqlite:///{path}"
    store = await open_store(url)
    try:
        await store.write(typed(envs))
    finally:
        await store.close()
    return url


async def test_stored_peak_floor_over_the_budget_is_network(target: str, tmp_path: Path) -> None:
    rtts = [300.0 + 5 * i for i in range(20)]          # 300 … 395 ms: P95 ≈ 390, P50 ≈ 347
    db = await _write_db(tmp_path / "agent.db", _peak_envelopes("127.0.0.1", rtts))
    sse = f"{target}/sse?count=5&interval_ms=5"
    code, out, err = await cli(tmp_path, sse, "--db", db, "--concurrency", "1", "--json")
    assert code == 1, err
    doc = json.loads(out)
    n = doc["network"]
    assert n["source"] == "stored" and n["agent"] == "sh-ct-1" and n["target"] == "local-gpu"
    assert n["rounds"] == 9 and n["days"] == 7 and n["window"] == "20-23" and n["line"] == "163"
    assert n["description"] == ("stored evening-peak data: 9 rounds over 7 days (20-23 agent-local), "
                                "agent sh-ct-1, target local-gpu")
    assert n["floor_ms"] == pytest.approx(390.25, rel=0.02)        # the sketch: within ~1 %
    assert n["rtt_p50_ms"] == pytest.approx(347.5, rel=0.02)
    assert doc["budget"]["network_ms"] == pytest.approx(3 * n["floor_ms"])
    assert doc["verdict"]["segment"] == "network" and "route alone" in doc["verdict"]["message"]
    assert doc["single"]["ok"]     # steps 2 and 3 still ran, live
    # for people it says which source it used
    code, out, _ = await cli(tmp_path, sse, "--db", db, "--concurrency", "1")
    assert code == 1 and "Verdict (network)" in out
    assert "stored evening-peak data: 9 rounds over 7 days" in out
    # a window with no data: live, and it says why
    code, out, err = await cli(tmp_path, sse, "--db", db, "--window", "3-6",
                               "--concurrency", "1", "--json")
    doc = json.loads(out)
    assert code == 0, err
    assert doc["network"]["source"] == "live" and "no evening-peak (3-6) RTT for 127.0.0.1" in \
        doc["network"]["notes"][0]


async def test_unreachable_url_is_a_verdict_not_a_traceback(tmp_path: Path, closed_port: int) -> None:
    code, out, err = await cli(tmp_path, f"http://127.0.0.1:{closed_port}/sse", "--json")
    assert code == 1 and "Traceback" not in err
    doc = json.loads(out)
    assert doc["network"]["source"] == "live" and doc["network"]["floor_ms"] is not None
    assert doc["single"]["ok"] is False and doc["single"]["error_kind"] == "connect"
    assert doc["sweep"] == {"levels": [], "skipped": "the single request failed"}
    v = doc["verdict"]
    assert v["segment"] == "failed" and v["message"].startswith("the URL failed (connect)")
    assert "nothing accepts the connection" in v["advice"]
    code, out, err = await cli(tmp_path, f"http://127.0.0.1:{closed_port}/sse")
    assert code == 1 and "Traceback" not in err and "Verdict (failed)" in out


@pytest.mark.parametrize(("args", "needle"), [
    (["ftp://example.net/sse"], "URL:"),
    (["http://127.0.0.1:99999/sse"], "URL: bad port"),
    (["http://127.0.0.1:1/sse", "--concurrency", "1,x"], "--concurrency"),
    (["http://127.0.0.1:1/sse", "--concurrency", "0"], "--concurrency"),
    (["http://127.0.0.1:1/sse", "--tls", "1.1"], "--tls"),
    (["http://127.0.0.1:1/sse", "--ttft-ms", "0"], "--ttft-ms"),
    (["http://127.0.0.1:1/sse", "--calls", "0"], "--calls"),
    (["http://127.0.0.1:1/sse", "--window", "25-3"], "--window"),
    (["http://127.0.0.1:1/sse", "--days", "0"], "--days"),
    (["http://127.0.0.1:1/sse", "--mode", "grpc"], "--mode"),
    (["http://127.0.0.1:1/v1/chat/completions", "--extra-body", "[1]"], "--extra-body"),
    (["http://127.0.0.1:1/v1/chat/completions", "--extra-body", "{"], "--extra-body"),
    (["http://127.0.0.1:1/v1/chat/completions", "--api-key-file", "/nonexistent/key"], "--api-key-file"),
    (["http://127.0.0.1:1/sse", "--db", "sqlite:////nonexistent/dir/x.db"], "--db"),
])
async def test_usage_errors_exit_2_naming_the_option(tmp_path: Path, args: list[str], needle: str) -> None:
    code, out, err = await cli(tmp_path, *args)
    assert code == 2, (out, err)
    assert needle in err and "Traceback" not in err and out == ""


async def test_without_icmp_the_floor_comes_from_tcp_connects(monkeypatch: pytest.MonkeyPatch,
                                                              listener: int) -> None:
    from netprobe.probes.base import ProbeContext

    def denied(self: ProbeContext) -> Any:
        raise SetupError("cannot open an ICMP socket (test)")

    monkeypatch.setattr(ProbeContext, "icmp_engine", denied)
    monkeypatch.setattr(ProbeContext, "trace_engine", denied)
    n = await live_floor(f"http://127.0.0.1:{listener}/sse", FAST_LIVE)
    assert n.source == "live" and n.method == "tcp" and n.floor_ms is not None and n.samples == 3
    assert n.line is None and any(note.startswith("mtr skipped") for note in n.notes)
    assert any("ICMP not permitted" in note and f"port {listener}" in note for note in n.notes)
