"""The rmtr probe through its real paths: `netprobe probe rmtr` and the agent (config → round → store →
route events) against a real `netprobe target --tokens` on loopback, whose POST /api/v1/trace traces
back toward the requester; and what it makes of a reflector that answers badly, or not at all."""

from __future__ import annotations

import asyncio
import copy
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from pydantic import ValidationError

from netprobe.agent.daemon import Agent
from netprobe.config.agent import load_config
from netprobe.net.resolve import Resolver
from netprobe.probes import REGISTRY
from netprobe.probes.base import ProbeContext, ProbeTarget, ReflectorAuth
from netprobe.probes.rmtr.runtime import BadAnswer, RmtrResult, RmtrSettings, read_answer
from netprobe.store import open_store
from tests.support.farend import Reflector, running_reflector
from tests.support.store import path_events


@pytest.fixture
def reflector(tmp_path: Path) -> Iterator[Reflector]:
    with running_reflector(tmp_path / "tokens.json") as r:
        yield r


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # PYTHONPATH kept: the subprocess runs this tree's netprobe, not an installed one
    base = {"PATH": "/usr/bin:/bin", "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "netprobe.cli", "probe", *args], capture_output=True,
                          text=True, timeout=120, env={**base, **(env or {})})


def test_probe_rmtr_json_is_mtr_layout_traced_back_then_429_and_401(reflector: Reflector,
                                                                     tmp_path: Path) -> None:
    token = tmp_path / "reflector.token"
    token.write_text(reflector.token + "\n")
    url = f"http://127.0.0.1:{reflector.http}"
    out = cli("rmtr", url, "--token-file", str(token), "--cycles", "2", "--interval", "0.1", "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    got = json.loads(out.stdout)
    want = json.loads(cli("mtr", "-c", "2", "-i", "0.1", "--json", "127.0.0.1").stdout)
    assert set(want) <= set(got) and set(got["report"]) == set(want["report"])      # mtr's layout
    assert set(got["report"]["hubs"][0]) == set(want["report"]["hubs"][0])
    assert (got["probe"], got["status"], got["reached"], got["reflector"]) == ("rmtr", "ok", True, url)
    # traced from the reflector toward this host, as the reflector saw it
    assert got["address"] == got["report"]["mtr"]["dst"] == "127.0.0.1" and got["host"] == "127.0.0.1"
    assert [h["host"] for h in got["report"]["hubs"]] == ["127.0.0.1"]
    assert got["route"]["label"] == "other" and got["route"]["hash"] and got["sent"] == 2 == got["received"]

    again = cli("rmtr", url, "--token-file", str(token), "--cycles", "2", "--interval", "0.1", "--json")
    r = json.loads(again.stdout)
    assert again.returncode == 1 and (r["status"], r["error_kind"]) == ("error", "rate_limited"), again.stdout
    assert "429" in r["error"] and "retry after" in r["error"] and r["report"]["hubs"] == []

    table = cli("rmtr", url, "--token-file", str(token), "--cycles", "1")          # people: a table
    assert table.returncode == 1 and "rate-limiting" in table.stdout and "rmtr icmp" in table.stdout

    wrong = tmp_path / "wrong.token"
    wrong.write_text("not-the-token")
    bad = cli("rmtr", url, "--token-file", str(wrong), "--json")
    r = json.loads(bad.stdout)
    assert bad.returncode == 1 and r["error_kind"] == "bad_token" and "token" in r["error"], bad.stdout
    assert reflector.token not in bad.stdout + bad.stderr


@pytest.mark.parametrize(("args", "env", "needle"), [
    (["http://127.0.0.1:9"], {}, "--token-file: the reflector needs this agent's token"),
    (["http://127.0.0.1:9", "--token-file", "/nonexistent/token"], {}, "--token-file /nonexistent/token"),
    (["127.0.0.1:9"], {"NETPROBE_REFLECTOR_TOKEN": "t"}, "TARGET_URL"),
    (["http://127.0.0.1:9", "--cycles", "31"], {"NETPROBE_REFLECTOR_TOKEN": "t"}, "--cycles"),
    (["http://127.0.0.1:9", "--interval", "0.05"], {"NETPROBE_REFLECTOR_TOKEN": "t"}, "--interval"),
    (["http://127.0.0.1:9", "--mode", "raw"], {"NETPROBE_REFLECTOR_TOKEN": "t"}, "--mode"),
])
def test_probe_rmtr_bad_input_exits_2(args: list[str], env: dict[str, str], needle: str) -> None:
    out = cli("rmtr", *args, env=env)
    assert out.returncode == 2 and needle in out.stderr, out.stderr


def test_an_unreachable_reflector_is_data() -> None:
    out = cli("rmtr", "http://127.0.0.1:9", "--json", env={"NETPROBE_REFLECTOR_TOKEN": "t"})
    r = json.loads(out.stdout)
    assert out.returncode == 1 and (r["status"], r["error_kind"]) == ("error", "connect"), out.stdout


def test_settings_keep_to_the_reflectors_limits() -> None:
    with pytest.raises(ValidationError, match="minimum interval between one agent's traces"):
        RmtrSettings(every=20)
    with pytest.raises(ValidationError, match="longer than every"):
        RmtrSettings(every=30, cycles=30, interval=1.0)
    assert RmtrSettings(every=30).round_seconds() == 10 * 1.0 + 2.0 + 10.0


# -- what comes over the wire ---------------------------------------------------------------------------

def _answer() -> dict[str, Any]:
    """An answer as a reflector writes it: `probe mtr --json`'s result of a 3-hop trace."""
    hubs = [{"count": i, "host": h, "Loss%": 0.0, "Snt": 2, "Last": 1.0, "Avg": 1.0, "Best": 1.0, "Wrst": 1.0,
             "StDev": 0.0, "Javg": 0.0, "ASN": "AS???", "org": None, "country": None, "addresses": [h],
             "rate_limited": False, "icmp_errors": {}, "samples_ms": [1.0, 1.0]}
            for i, h in enumerate(["198.18.0.9", "202.97.1.1", "198.18.0.1"], 1)]
    return {"probe": "mtr", "host": "198.18.0.1", "address": "198.18.0.1",
            "started_at": "2026-12-03T04:00:00Z", "duration_ms": 2000.0, "status": "ok", "error_kind": None,
            "error": None, "mode": "icmp", "port": None, "cycles": 2, "max_hops": 30, "reached": True,
            "sent": 2, "received": 2, "loss_pct": 0.0,
            "rtt_ms": {"min": 1.0, "avg": 1.0, "p50": 1.0, "p95": 1.0, "max": 1.0, "stdev": 0.0},
            "jitter_ms": 0.0, "samples_ms": [1.0, 1.0],
            "report": {"mtr": {"src": "dc-1", "dst": "198.18.0.1", "tos": 0, "tests": 2, "psize": "64",
                               "bitpattern": "0x00"}, "hubs": hubs},
            "route": {"label": "cn2-gia", "asns": [4809], "hash": "0123456789abcdef"}}


SETTINGS = RmtrSettings(cycles=2, interval=0.1)


def test_a_good_answer_keeps_observations_only() -> None:
    answer = _answer()
    answer["report"]["hubs"][1].update(ASN="AS4809", org="someone else's idea", rate_limited=True)
    trace = read_answer(answer, SETTINGS)
    assert (trace.address, trace.source, trace.reached) == ("198.18.0.1", "dc-1", True)
    assert [h.addresses for h in trace.hops] == [["198.18.0.9"], ["202.97.1.1"], ["198.18.0.1"]]
    # ASN, organisation and rate limiting are not taken from the reflector
    assert all(h.asn is None and h.org is None and not h.rate_limited for h in trace.hops)


def _set(path: str, value: Any) -> dict[str, Any]:
    answer = copy.deepcopy(_answer())
    node: Any = answer
    keys = [int(k) if k.isdigit() else k for k in path.split(".")]
    for k in keys[:-1]:
        node = node[k]
    node[keys[-1]] = value
    return answer


@pytest.mark.parametrize(("answer", "needle"), [
    ([1, 2], "JSON object"),
    (_set("sent", "2"), "sent"),
    (_set("received", 3), "received"),
    (_set("reached", None), "reached"),
    (_set("probe", "icmp"), "probe"),
    (_set("cycles", 3), "cycles"),
    (_set("report.hubs.1.count", 5), "expected TTL 2"),
    (_set("report.hubs.1.addresses", ["not-an-ip"]), "not an IP address"),
    (_set("report.hubs.1.host", "198.18.0.77"), "host and addresses disagree"),
    (_set("report.hubs.1.samples_ms", [1.0, 1.0, 1.0]), "3 samples for 2 cycles"),
    (_set("report.hubs.1.samples_ms", [-1.0, 1.0]), "report.hubs.1.samples_ms"),
    (_set("report.hubs.1.extra", 1), "extra"),
    (_set("address", "::ffff:zz"), "address"),
    (_set("report", None), "report"),
])
def test_a_bad_answer_is_refused_naming_the_problem(answer: Any, needle: str) -> None:
    with pytest.raises(BadAnswer, match=needle.replace(".", r"\.")):
        read_answer(answer, SETTINGS)


@pytest.fixture
async def fake_reflector() -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """A reflector that answers as `behave` says: a body, a status, or silence."""
    behave: dict[str, Any] = {}

    async def trace(request: web.Request) -> web.StreamResponse:
        if behave.get("hang"):
            await asyncio.sleep(60)
        return web.Response(status=behave.get("status", 200), body=behave["body"],
                            content_type="application/json")

    app = web.Application()
    app.router.add_post("/api/v1/trace", trace)
    runner = web.AppRunner(app, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}", behave
    finally:
        await runner.cleanup()


async def _round(url: str, **settings: Any) -> RmtrResult:
    ctx = ProbeContext(resolver=Resolver(), reflector=ReflectorAuth("t"))
    target = ProbeTarget(id="x", host="127.0.0.1", line="cn2-gia", options={"reflector": url})
    try:
        result = await REGISTRY["rmtr"].round(target, RmtrSettings(cycles=2, interval=0.1, **settings), ctx)
    finally:
        await ctx.close()
    assert isinstance(result, RmtrResult)
    return result


@pytest.mark.parametrize(("behave", "kind"), [
    ({"body": b"{not json"}, "bad_reply"),
    ({"body": json.dumps(_set("report.hubs.0.samples_ms", [1e400])).encode()}, "bad_reply"),
    ({"body": b"x" * (1 << 21)}, "bad_reply"),                       # over the answer cap
    ({"status": 404, "body": b"{}"}, "no_reflector"),
    ({"status": 400, "body": b'{"error": "cycles: 1..5"}'}, "bad_request"),
    ({"status": 503, "body": b""}, "http_503"),
    ({"hang": True}, "timeout"),
])
async def test_a_misbehaving_reflector_is_a_result_in_error(fake_reflector: tuple[str, dict[str, Any]],
                                                            behave: dict[str, Any], kind: str) -> None:
    url, how = fake_reflector
    how.update(behave)
    result = await _round(url, timeout=0.5)
    assert (result.status, result.error_kind) == ("error", kind), result.error
    assert result.route is None and result.hops == [] and result.reflector == url


async def test_the_answer_is_classified_here_with_this_hosts_rules(
        fake_reflector: tuple[str, dict[str, Any]]) -> None:
    """The reflector's label (cn2-gia) is not taken: the hops say 163 by this host's prefixes, and the
    target was sold as cn2-gia, so the way back does not match."""
    url, how = fake_reflector
    how["body"] = json.dumps(_answer()).encode()
    r = await _round(url)
    assert (r.status, r.address, r.source, r.reached) == ("ok", "198.18.0.1", "dc-1", True)
    assert r.route is not None and (r.route.label, r.route.asns, r.route.mismatch) == ("163", [4134], True)
    assert r.hops[1].asn == 4134 and r.hops[1].org == "China Telecom 163 (ChinaNet)"
    assert (r.sent, r.received, r.loss_pct) == (2, 2, 0.0)
    assert r.to_dict()["report"]["mtr"]["dst"] == "198.18.0.1"


# -- the agent ------------------------------------------------------------------------------------------

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

[classification]
# this host's own rules: loopback is ChinaNet here (the reflector's defaults would say "other")
prefixes = [{{ asn = 4134, cidrs = ["127.0.0.0/8"] }}]

[probes.rmtr]
every = "30s"
cycles = 2
interval = "0.1s"
timeout = "2s"

[[targets]]
id = "loop-22"          # its first rmtr round is 0.2 s after start (the scheduler's stable spread)
host = "127.0.0.1"
datacenter = "hk"
line = "cn2-gia"
probes = ["rmtr"]
reflector = "http://127.0.0.1:{http}"
"""


def test_agent_stores_the_way_back_and_its_return_line_mismatch(reflector: Reflector, tmp_path: Path) -> None:
    db, cfg, token = tmp_path / "agent.db", tmp_path / "agent.toml", tmp_path / "reflector.token"
    token.write_text(reflector.token)
    cfg.write_text(AGENT.format(db=db, token=token, http=reflector.http))
    assert asyncio.run(Agent(cfg, load_config(cfg), duration=4.0).run()) == 0

    async def read() -> tuple[list[dict[str, Any]], list[Any]]:
        store = await open_store(f"sqlite:///{db}", upgrade=False)
        try:
            return [r.envelope.raw for r in await store.results()], await path_events(store)
        finally:
            await store.close()

    results, events = asyncio.run(read())
    [env] = results
    r = env["result"]
    assert (env["probe"], r["status"], r["address"], r["reached"]) == ("rmtr", "ok", "127.0.0.1", True)
    assert r["route"]["label"] == "163" and r["route"]["mismatch"] is True
    [event] = events
    assert (event.kind, event.direction, event.label) == ("return_line_mismatch", "return", "163")
    assert event.details["declared"] == "cn2-gia"
