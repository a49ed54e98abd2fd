"""RIPE Atlas results read by netprobe (`db import`) against RIPE's own parser, ripe.atlas.sagan, on results
of every documented firmware generation (tests/support/atlas.py): sent, received, min/avg/max, per-hop
Snt and Avg, reached. Where sagan's model stops short of mtr's figures the mapping is spelled out here:
a hop's Snt is its packets less duplicates (sagan already drops late replies), Avg the mean of their RTTs.
"""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ripe.atlas.sagan import PingResult, Result, TracerouteResult

from netprobe.probes import atlas
from netprobe.store import open_store
from netprobe.store.envelopes import parse_envelope
from tests.support.atlas import PINGS, TRACE_V1_TEXT, TRACES

QUIET = {"on_error": Result.ACTION_IGNORE, "on_malformation": Result.ACTION_IGNORE}


def sagan(obj: dict[str, Any], kind: str) -> Any:
    """RIPE's reading; results before 4460 get the `type` the Atlas API adds when serving them, and a
    4400 traceroute its `addr` as `dst_addr` too (sagan maps the old names for pings only)."""
    extra = {"dst_addr": obj["addr"]} if kind == "traceroute" and "addr" in obj else {}
    return Result.get({"type": kind, **obj, **extra}, **QUIET)


def close(a: float | None, b: float | None) -> bool:
    """sagan rounds RTTs to the microsecond (3 decimals of a ms)."""
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, abs_tol=5e-4)


@pytest.mark.parametrize("name", sorted(PINGS))
def test_ping_reads_as_sagan_does(name: str) -> None:
    obj = PINGS[name]
    ref = sagan(obj, "ping")
    assert isinstance(ref, PingResult)
    env = atlas.to_envelope(obj)
    parse_envelope(env, name)            # the store takes it
    r = env["result"]
    assert env["probe"] == "icmp" and env["agent"]["id"] == f"atlas-{ref.probe_id}"
    assert r["address"] == ref.destination_address
    assert (r["sent"], r["received"]) == (ref.packets_sent, ref.packets_received), name
    assert r["duplicates"] == ref.duplicates
    rtt = r["rtt_ms"] or {}
    for mine, theirs in ((rtt.get("min"), ref.rtt_min), (rtt.get("avg"), ref.rtt_average),
                         (rtt.get("max"), ref.rtt_max)):
        assert close(mine, theirs), (name, rtt, ref.rtt_min, ref.rtt_average, ref.rtt_max)
    replies = [p.rtt for p in ref.packets if not p.dup and p.rtt is not None]
    assert [round(s, 3) for s in r["samples_ms"] if s is not None] == replies
    assert r["loss_pct"] == (100.0 * (ref.packets_sent - ref.packets_received) / ref.packets_sent
                             if ref.packets_sent else 100.0)
    assert r["status"] == ("ok" if ref.packets_received else "down" if ref.packets_sent else "error")


def test_summary_only_ping_keeps_atlas_figures_without_inventing_samples() -> None:
    r = atlas.to_envelope(PINGS["v1-summary-lossy"])["result"]
    assert r["samples_ms"] == [] and r["jitter_ms"] is None
    assert r["rtt_ms"] == {"min": 30.1, "avg": 30.5, "max": 30.9}
    assert r["loss_pct"] == 100 / 3 and r["atlas"] == {"fw": 1, "msm_id": 1001, "type": "ping"}
    down = atlas.to_envelope(PINGS["v1-summary-down"])["result"]
    assert down["rtt_ms"] is None and down["status"] == "down" and down["loss_pct"] == 100.0


def test_errors_while_pinging_are_requests_sent_and_named() -> None:
    sendto = atlas.to_envelope(PINGS["5000-sendto-error"])["result"]
    assert sendto["samples_ms"] == [38.2, None] and sendto["status"] == "ok"
    dns = atlas.to_envelope(PINGS["5000-dns-error"])
    assert dns["result"]["status"] == "error" and dns["result"]["error_kind"] == "send"
    assert "dns resolution failed" in dns["result"]["error"]
    assert dns["target"]["id"] == "nonexistent.example.net" and dns["result"]["sent"] == 0


def _sagan_hop(hop: Any) -> tuple[int, float, int]:
    """(Snt, Avg, replies carrying an ICMP error) of one of sagan's hops, as mtr would count them."""
    sent = [p for p in hop.packets if not p.raw_data.get("dup")]
    rtts = [p.rtt for p in sent if p.rtt is not None]
    return len(sent), (sum(rtts) / len(rtts) if rtts else 0.0), sum(1 for p in sent if p.is_error)


@pytest.mark.parametrize("name", sorted(TRACES))
def test_traceroute_reads_as_sagan_does(name: str) -> None:
    obj = TRACES[name]
    ref = sagan(obj, "traceroute")
    assert isinstance(ref, TracerouteResult) and not ref.is_malformed
    env = atlas.to_envelope(obj)
    parse_envelope(env, name)
    r = env["result"]
    hubs = r["report"]["hubs"]
    assert env["probe"] == "mtr" and r["address"] == ref.destination_address
    assert r["mode"] == (ref.protocol or "UDP").lower()
    assert [h["count"] for h in hubs] == [h.index for h in ref.hops]
    for hub, hop in zip(hubs, ref.hops, strict=True):
        snt, avg, flagged = _sagan_hop(hop)
        assert hub["Snt"] == snt, (name, hub, hop.index)
        assert close(hub["Avg"], avg), (name, hub, avg)
        assert sum(hub["icmp_errors"].values()) == flagged, (name, hub)
        answered = sum(1 for p in hop.packets if not p.raw_data.get("dup") and p.rtt is not None)
        assert hub["Loss%"] == (100.0 * (snt - answered) / snt if snt else 0.0)
    assert r["reached"] is ref.destination_ip_responded, name
    if ref.destination_ip_responded:
        last = [p for p in ref.hops[-1].packets if not p.raw_data.get("dup")]
        rtts = [p.rtt for p in last if p.rtt is not None]
        assert (r["sent"], r["received"]) == (len(last), len(rtts))
        assert close(r["rtt_ms"]["min"], min(rtts)) and close(r["rtt_ms"]["max"], max(rtts))
        assert close(r["rtt_ms"]["avg"], sum(rtts) / len(rtts))
        assert r["loss_pct"] == r["route"]["path_loss_pct"] == hubs[-1]["Loss%"]
    else:
        assert r["received"] == 0 and r["rtt_ms"] is None and r["loss_pct"] == 100.0
        assert r["status"] in ("down", "error")


def test_icmp_errors_count_as_answers_with_their_rtt_and_are_flagged() -> None:
    hubs = atlas.to_envelope(TRACES["4750-icmp-errors"])["result"]["report"]["hubs"]
    assert hubs[1]["icmp_errors"] == {"13": 1, "N": 1} and hubs[1]["Loss%"] == 0.0
    assert hubs[1]["Avg"] == (8.5 + 8.75 + 8.625) / 3
    assert hubs[2]["icmp_errors"] == {"A": 1} and hubs[2]["Snt"] == 3 and hubs[2]["Loss%"] == 100 / 3
    unreachable = atlas.to_envelope(TRACES["4610-udp-unreachable"])["result"]
    assert not unreachable["reached"] and unreachable["report"]["hubs"][-1]["icmp_errors"] == {"H": 2}
    assert unreachable["report"]["hubs"][1]["Snt"] == 3   # the duplicate is no probe of its own
    sendto = atlas.to_envelope(TRACES["5000-sendto-error"])["result"]
    assert sendto["status"] == "error" and "sendto failed" in sendto["error"]
    assert sendto["report"]["hubs"][0]["Snt"] == 1 and sendto["report"]["hubs"][0]["host"] == "???"


def test_firmware_1_traceroute_text() -> None:
    env = atlas.to_envelope(TRACE_V1_TEXT)
    parse_envelope(env, "v1")
    r = env["result"]
    hubs = r["report"]["hubs"]
    assert r["address"] == "193.0.14.129" and env["target"]["id"] == "k.root-servers.net"
    assert [h["host"] for h in hubs] == ["192.168.1.1", "???", "80.249.208.1", "193.0.14.129"]
    assert hubs[2]["addresses"] == ["80.249.208.1", "80.249.208.2"] and hubs[2]["Snt"] == 3
    assert [h["Snt"] for h in hubs] == [3, 3, 3, 3] and hubs[1]["Loss%"] == 100.0
    assert r["reached"] and r["sent"] == 3 and r["received"] == 3 and r["rtt_ms"]["min"] == 9.987


def test_pre_4460_results_without_type_read_as_the_typed_ones() -> None:
    for obj in (PINGS["v1-summary"], PINGS["4400-list"], TRACES["4400-udp"]):
        assert "type" not in obj
        kind = "ping" if "sent" in obj else "traceroute"
        assert atlas.to_envelope(obj) == atlas.to_envelope({**obj, "type": kind})


def _write(path: Path, lines: list[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines))


def test_db_import_takes_every_generation_and_names_lines_it_cannot(tmp_path: Path) -> None:
    good = [*PINGS.values(), *TRACES.values(), TRACE_V1_TEXT]
    odd = [{"hello": "world"}, {**TRACES["5000-tcp"], "type": "dns"}, {**TRACES["5000-tcp"], "proto": "GRE"}]
    src = tmp_path / "atlas.jsonl"
    _write(src, [json.dumps(o) for o in good + odd])
    url = f"sqlite:///{tmp_path / 'atlas.db'}"
    out = subprocess.run([sys.executable, "-m", "netprobe.cli", "db", "import", str(src), "--db", url],
                         capture_output=True, text=True, timeout=120)
    err = " ".join(out.stderr.split())
    assert out.returncode == 1, out.stdout + out.stderr
    n = len(good)
    assert (f"{src}:{n + 1}: neither a result envelope (no id, probe, started_at, agent or target) nor a "
            f"RIPE Atlas result (no prb_id, msm_id or fw)") in err, err
    assert f"{src}:{n + 2}: a RIPE Atlas dns result: only ping and traceroute results are imported" in err
    assert f"{src}:{n + 3}: Atlas proto 'gre' is not ICMP, UDP or TCP" in err
    assert f"imported {n} results" in out.stdout and "3 bad lines skipped" in out.stdout

    async def stored() -> list[dict[str, Any]]:
        store = await open_store(url)
        try:
            rows: list[dict[str, Any]] = []
            for prb in ("atlas-6012", "atlas-6013", "atlas-21"):
                rows += [r.envelope.raw for r in await store.results(prb)]
            return rows
        finally:
            await store.close()

    rows = asyncio.run(stored())
    assert sorted(r["id"] for r in rows) == sorted(atlas.to_envelope(o)["id"] for o in good)
