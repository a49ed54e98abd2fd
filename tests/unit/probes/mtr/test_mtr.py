"""mtr probe without the lab: packet building and parsing, the per-hop figures and the rate-limit rule,
bad input, and real traces to loopback in every mode."""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
from typing import Any

import pytest

from netprobe.probes.mtr import packets
from netprobe.probes.mtr.engine import ProbeRecord
from netprobe.probes.mtr.hops import build_path, flag_rate_limited
from netprobe.probes.mtr.runtime import MtrSettings

SRC, DST = socket.inet_aton("198.18.0.1"), socket.inet_aton("198.19.0.1")
SRC6 = socket.inet_pton(socket.AF_INET6, "2001:2::1")
DST6 = socket.inet_pton(socket.AF_INET6, "2001:2:0:1::1")


def valid(pseudo: bytes, segment: bytes) -> bool:
    return packets.ones_sum(pseudo + segment) == 0xFFFF


# --- packets ----------------------------------------------------------------------------------------

def test_icmp_probes_share_one_checksum_and_are_valid() -> None:
    probes = [packets.icmp_echo(False, 0x1234, seq) for seq in (0, 1, 77, 0xFFFF)]
    assert len({p[:4] for p in probes}) == 1  # type, code, checksum: the flow a balancer hashes
    assert all(packets.ones_sum(p) == 0xFFFF for p in probes)
    assert [struct.unpack_from("!HH", p, 4) for p in probes] == [(0x1234, s) for s in (0, 1, 77, 0xFFFF)]


@pytest.mark.parametrize(("src", "dst"), [(SRC, DST), (SRC6, DST6)])
def test_udp_probe_checksum_is_the_probe_id_and_valid(src: bytes, dst: bytes) -> None:
    for want in (1, 2, 0x8000, 0xFFFE):
        seg = packets.udp_probe(src, dst, 40000, 33434, want)
        assert struct.unpack_from("!HHHH", seg) == (40000, 33434, len(seg), want)
        assert valid(packets.pseudo_header(src, dst, packets.PROTO_UDP, len(seg)), seg)


def test_tcp_syn_checksum_valid_and_flow_constant() -> None:
    segs = [packets.tcp_syn(SRC, DST, 40001, 443, seq) for seq in (1, 2, 0xFFFFFFFF)]
    assert all(valid(packets.pseudo_header(SRC, DST, packets.PROTO_TCP, 20), s) for s in segs)
    assert {s[:4] for s in segs} == {struct.pack("!HH", 40001, 443)}
    assert all(s[13] == packets.TCP_SYN for s in segs)


def ip4(src: bytes, dst: bytes, proto: int, body: bytes, ttl: int = 64) -> bytes:
    return struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(body), 0, 0, ttl, proto, 0, src, dst) + body


def icmp_error(kind: int, code: int, router: bytes, quoted: bytes) -> bytes:
    return ip4(router, SRC, packets.PROTO_ICMP, struct.pack("!BBHI", kind, code, 0, 0) + quoted[:28])


def test_time_exceeded_finds_each_kind_of_probe() -> None:
    router = socket.inet_aton("59.43.1.1")
    echo = ip4(SRC, DST, packets.PROTO_ICMP, packets.icmp_echo(False, 0xBEEF, 9), ttl=1)
    udp = ip4(SRC, DST, packets.PROTO_UDP, packets.udp_probe(SRC, DST, 40000, 33434, 321), ttl=1)
    tcp = ip4(SRC, DST, packets.PROTO_TCP, packets.tcp_syn(SRC, DST, 40001, 443, 0xABCDEF), ttl=1)
    cases = ((echo, ("icmp", 0xBEEF, 9)), (udp, ("udp", 40000, 321)), (tcp, ("tcp", 40001, 0xABCDEF)))
    for quoted, key in cases:
        reply = packets.parse_icmp(icmp_error(11, 0, router, quoted), b"", False, 0xBEEF)
        assert reply is not None and reply.key == key and reply.kind == "ttl"
        assert reply.dest == DST and reply.responder == router
    # port unreachable from the destination itself ends a UDP trace; from a router it is a refusal
    reached = packets.parse_icmp(icmp_error(3, 3, DST, udp), b"", False, 0xBEEF)
    refused = packets.parse_icmp(icmp_error(3, 1, router, udp), b"", False, 0xBEEF)
    assert reached is not None and reached.kind == "reached"
    assert refused is not None and refused.kind == "unreach"


def test_echo_replies_of_others_and_garbage_are_ignored() -> None:
    reply = ip4(DST, SRC, packets.PROTO_ICMP, struct.pack("!BBHHH", 0, 0, 0, 0xBEEF, 3) + bytes(36))
    assert packets.parse_icmp(reply, b"", False, 0xBEEF) is not None
    assert packets.parse_icmp(reply, b"", False, 0x0001) is None
    for junk in (b"", b"\x45" * 10, ip4(DST, SRC, 1, b"\x0b\x00")):
        assert packets.parse_icmp(junk, b"", False, 0xBEEF) is None


def test_syn_ack_and_rst_from_the_destination() -> None:
    for flags in (packets.TCP_SYN | packets.TCP_ACK, packets.TCP_RST | packets.TCP_ACK):
        seg = struct.pack("!HHIIBBHHH", 443, 40001, 5, 0xABCDEF + 1, 5 << 4, flags, 0, 0, 0)
        reply = packets.parse_tcp(ip4(DST, SRC, packets.PROTO_TCP, seg), b"", False)
        assert reply is not None and reply.key == ("tcp", 40001, 0xABCDEF) and reply.kind == "reached"
    bare_syn = struct.pack("!HHIIBBHHH", 443, 40001, 5, 0, 5 << 4, packets.TCP_SYN, 0, 0, 0)
    assert packets.parse_tcp(ip4(DST, SRC, packets.PROTO_TCP, bare_syn), b"", False) is None


# --- hops -------------------------------------------------------------------------------------------

def rec(cycle: int, ttl: int, rtt: float | None, who: str | None = None, kind: str = "ttl") -> ProbeRecord:
    r = ProbeRecord(cycle, ttl, 0, rtt, who if rtt is not None else None, kind if rtt is not None else None)
    return r


def test_path_up_to_the_destination_with_mtr_figures() -> None:
    records = []
    for c, (a, b, d) in enumerate([(1.0, 10.0, 20.0), (3.0, None, 22.0), (2.0, 12.0, 24.0)]):
        records += [rec(c, 1, a, "r1"), rec(c, 2, b, "r2" if c else "r2b"), rec(c, 3, d, "dst", "reached")]
    records += [rec(0, 4, 21.0, "dst", "reached"), rec(0, 5, 21.0, "dst", "reached")]  # beyond: not hops
    path = build_path(records, 3)
    assert path.reached and [h.count for h in path.hops] == [1, 2, 3]
    first, second, dest = (h.to_dict() for h in path.hops)
    assert first["Snt"] == 3 and first["Last"] == 2.0 and first["Best"] == 1.0 and first["Wrst"] == 3.0
    assert first["Avg"] == 2.0 and first["StDev"] == pytest.approx(1.0)  # sample stdev, as mtr
    assert first["Javg"] == pytest.approx(1.5)
    assert second["Loss%"] == pytest.approx(100 / 3) and second["addresses"] == ["r2b", "r2"]
    assert second["rate_limited"] and not dest["rate_limited"]
    assert path.loss_pct == 0.0 and dest["host"] == "dst"


def test_unreached_path_is_full_loss_and_silent_hops_show() -> None:
    records = [rec(0, 1, 1.0, "r1"), rec(0, 2, None), rec(0, 3, 5.0, "r3"), rec(0, 4, None)]
    path = build_path(records, 1)
    assert not path.reached and path.loss_pct == 100.0
    assert [h.host for h in path.hops] == ["r1", "???", "r3"]


# mtr 0.95 ui/report.c json_close(): count integer, host string, ASN string (with -z), then each field
# as a JSON real when its printf format has an 'f' (Loss%, Last, Avg, Best, Wrst, StDev, Javg), else an
# integer (Snt); report.mtr: src, dst strings, tos, tests integers, psize, bitpattern strings.
MTR_HUB_TYPES = {"count": int, "host": str, "ASN": str, "Loss%": float, "Snt": int, "Last": float,
                 "Avg": float, "Best": float, "Wrst": float, "StDev": float, "Javg": float}
MTR_HEAD_TYPES = {"src": str, "dst": str, "tos": int, "tests": int, "psize": str, "bitpattern": str}


def test_json_keeps_mtr_types_for_every_kind_of_hop() -> None:
    """Answered, partly answered, silent and single-reply hops, through a JSON round trip: mtr's types
    (a silent hop's figures are 0.0, not null or 0, as mtr writes them)."""
    from datetime import UTC, datetime

    from netprobe.probes.mtr.runtime import MtrResult

    records = [rec(0, 1, 1.0, "r1"), rec(1, 1, 2.0, "r1"), rec(0, 2, None), rec(1, 2, None),
               rec(0, 3, 5.0, "r3"), rec(1, 3, None), rec(0, 4, 7.0, "dst", "reached"),
               rec(1, 4, 8.0, "dst", "reached")]
    path = build_path(records, 2)
    result = MtrResult(probe="mtr", host="dst.example", started_at=datetime.now(UTC), status="ok",
                       cycles=2, hops=path.hops, reached=path.reached, source="here")
    report = json.loads(json.dumps(result.to_dict()))["report"]
    assert {k: type(v) for k, v in report["mtr"].items()} == MTR_HEAD_TYPES
    assert len(report["hubs"]) == 4
    for hub in report["hubs"]:
        assert {k: type(hub[k]) for k in MTR_HUB_TYPES} == MTR_HUB_TYPES, hub
        assert list(hub)[:2] == ["count", "host"]
    silent = report["hubs"][1]
    assert silent["host"] == "???" and silent["Loss%"] == 100.0 and silent["Avg"] == 0.0


def test_rate_limit_rule() -> None:
    path = build_path([rec(c, t, None if (t == 1 and c % 2) else 1.0, f"r{t}", "reached" if t == 3 else "ttl")
                       for c in range(4) for t in (1, 2, 3)], 4)
    assert [h.rate_limited for h in path.hops] == [True, False, False] and path.loss_pct == 0.0
    # loss that persists to the destination is path loss, flagged nowhere
    hops = build_path([rec(c, t, None if c == 0 and t >= 2 else 1.0, f"r{t}", "reached" if t == 3 else "ttl")
                       for c in range(4) for t in (1, 2, 3)], 4).hops
    flag_rate_limited(hops)
    assert not any(h.rate_limited for h in hops) and hops[-1].loss_pct == 25.0


# --- settings and CLI -------------------------------------------------------------------------------

def test_settings_bounds() -> None:
    assert MtrSettings().every == 300 and MtrSettings().cycles == 10
    assert MtrSettings(mode="tcp").effective_port() == 443
    assert MtrSettings(mode="udp").effective_port() == 33434
    for bad in ({"max_hops": 0}, {"max_hops": 65}, {"cycles": 0}, {"mode": "sctp"},
                {"cycles": 100, "interval": 5.0}):
        with pytest.raises(ValueError):
            MtrSettings(**bad)


def netprobe(*args: str) -> subprocess.CompletedProcess[str]:
    # An empty network namespace of our own: loopback only, and no DNS query can leave the machine.
    return subprocess.run(["unshare", "--net", "sh", "-c", "ip link set lo up && exec \"$@\"", "sh",
                           sys.executable, "-m", "netprobe.cli", *args], capture_output=True, text=True,
                          timeout=60)


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="raw sockets and unshare need root")


@needs_root
@pytest.mark.parametrize(("args", "needle"), [
    (["--max-hops", "0"], "--max-hops"), (["--mode", "sctp"], "--mode"), (["--cycles", "0"], "--cycles"),
    (["-4", "-6"], "exclude"), (["--port", "70000"], "--port")])
def test_bad_options_exit_2(args: list[str], needle: str) -> None:
    out = netprobe("probe", "mtr", *args, "127.0.0.1")
    assert out.returncode == 2 and needle in out.stderr, out.stderr


@needs_root
def test_bad_host_exit_2_and_unresolvable_exit_1() -> None:
    out = netprobe("probe", "mtr", "a b")
    assert out.returncode == 2, out.stderr
    out = netprobe("probe", "mtr", "nonexistent.invalid", "--json")
    assert out.returncode == 1
    d = json.loads(out.stdout)
    assert d["status"] == "error" and d["error_kind"] == "dns"


@needs_root
def test_unreadable_mmdb_warns_and_the_trace_runs(tmp_path: Any) -> None:
    bad = tmp_path / "asn.mmdb"
    bad.write_bytes(b"not a database")
    out = netprobe("probe", "mtr", "-c", "1", "--asn-db", str(bad), "--json", "127.0.0.1")
    assert out.returncode == 0 and str(bad) in out.stderr and "warning" in out.stderr
    assert json.loads(out.stdout)["reached"]


@needs_root
@pytest.mark.parametrize(("mode", "extra"), [("icmp", []), ("udp", []), ("tcp", ["--port", "9"])])
@pytest.mark.parametrize("address", ["127.0.0.1", "::1"])
def test_loopback_trace_in_every_mode(mode: str, extra: list[str], address: str) -> None:
    """One hop, the destination itself: echo reply, port unreachable, and RST from a closed port."""
    out = netprobe("probe", "mtr", "--mode", mode, *extra, "-c", "3", "-i", "0.05", "--json", address)
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    hubs = d["report"]["hubs"]
    assert [h["host"] for h in hubs] == [address] and hubs[0]["Snt"] == 3 and hubs[0]["Loss%"] == 0.0
    assert d["route"]["label"] == "other" and d["route"]["path_loss_pct"] == 0.0
    assert 0 < hubs[0]["Avg"] < 50


@needs_root
def test_table_for_people() -> None:
    out = netprobe("probe", "mtr", "-c", "2", "-i", "0.05", "127.0.0.1")
    assert out.returncode == 0 and "Loss%" in out.stdout and "127.0.0.1" in out.stdout
    assert "line other" in out.stdout
