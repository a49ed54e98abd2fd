"""RIPE Atlas ping and traceroute results, one per documented firmware generation and variant, written
after RIPE's "Measurement result format" pages (versions 1, 4400, 4460, 4540, 4570, 4610, 4750, 5000) and
the keys the probe firmware writes (ping: x, dup, error; traceroute: x, err, late, dup, error, icmpext,
flags). Results before 4460 carry no `type` (the Atlas API adds one when serving them; RIPE's parser
needs it, netprobe does not).
"""

from __future__ import annotations

from typing import Any

R = dict[str, Any]


def _ping(fw: int, **fields: Any) -> R:
    base: R = {"fw": fw, "type": "ping", "prb_id": 6012, "msm_id": 1001, "timestamp": 1763668800 + fw,
               "from": "101.80.1.2"}
    return {**base, **fields}


def _trace(fw: int, **fields: Any) -> R:
    base: R = {"fw": fw, "type": "traceroute", "prb_id": 6013, "msm_id": 5001, "timestamp": 1763669800 + fw,
               "from": "101.80.1.2", "paris_id": 3, "size": 48}
    return {**base, **fields}


def _untyped(result: R) -> R:
    return {k: v for k, v in result.items() if k != "type"}


PINGS: dict[str, R] = {
    # firmware 1: summary only, no `result` list, no `type`; the destination is addr/name
    "v1-summary": _untyped(_ping(1, addr="178.63.78.16", name="atlas.ripe.net", avg=20.126, dup=0,
                                 min=19.938, max=20.3, rcvd=3, sent=3, size=56)),
    "v1-summary-lossy": _untyped(_ping(1, addr="178.63.78.16", name="atlas.ripe.net", avg=30.5, dup=0,
                                       min=30.1, max=30.9, rcvd=2, sent=3, size=56, timestamp=1332939000)),
    "v1-summary-down": _untyped(_ping(1, addr="178.63.78.16", name="atlas.ripe.net", avg=-1, dup=0,
                                      min=-1, max=-1, rcvd=0, sent=3, size=56, timestamp=1332939300)),
    # firmware 0 results were stored with numbers as strings
    "v0-strings": _ping(0, dst_addr="62.2.16.12", avg="58.042", dup="0", min="57.876", max="58.272",
                        rcvd="3", sent="3", src_addr="78.128.9.202"),
    # 4400: per-packet results arrive; mode ICMP4, addr/name/srcaddr, still no type
    "4400-list": _untyped(_ping(4430, addr="193.0.6.139", name="www.ripe.net", mode="ICMP4", avg=11.2,
                                dup=0, min=10.9, max=11.5, rcvd=2, sent=3, size=20, srcaddr="192.168.1.5",
                                ttl=54, result=[{"rtt": 10.9}, {"x": "*"}, {"rtt": 11.5}])),
    "4460-v4": _ping(4460, addr="62.2.16.12", af=4, dst_addr="62.2.16.12", dst_name="hsi.cablecom.ch",
                     proto="ICMP", avg=48.388333333333328, dup=0, min=43.87, max=56.949, rcvd=3, sent=3,
                     size=20, src_addr="192.168.178.21", ttl=52,
                     result=[{"rtt": 43.87}, {"rtt": 56.949}, {"rtt": 44.346}]),
    # 4540: lts; timeouts with srcaddr
    "4550-timeouts": _ping(4550, af=4, dst_addr="62.2.16.12", dst_name="hsi.cablecom.ch", proto="ICMP",
                           avg=27.301, dup=0, min=27.301, max=27.301, rcvd=1, sent=3, size=20, lts=365,
                           msm_name="Ping", step=360, ttl=54,
                           result=[{"srcaddr": "192.168.1.229", "x": "*"}, {"x": "*"},
                                   {"rtt": 27.301, "ttl": 54}]),
    "4570-v4": _ping(4570, af=4, dst_addr="62.2.16.12", dst_name="hsi.cablecom.ch", proto="ICMP",
                     avg=36.608333333333327, dup=0, min=36.424, max=36.741, rcvd=3, sent=3, size=12, lts=-1,
                     result=[{"rtt": 36.741}, {"rtt": 36.66}, {"rtt": 36.424}]),
    # 4610: duplicates are extra entries ({"dup": 1, "rtt"}), not requests
    "4610-duplicates": _ping(4610, af=4, dst_addr="62.2.16.24", dst_name="hsi.cablecom.ch", proto="ICMP",
                             avg=27.768, dup=2, min=27.768, max=27.768, rcvd=1, sent=2, size=12, lts=38,
                             ttl=54, result=[{"srcaddr": "192.168.103.130", "x": "*"},
                                             {"dup": 1, "rtt": 36.454, "ttl": 54}, {"dup": 1, "rtt": 37.756},
                                             {"rtt": 27.768}]),
    # a late reply is reported as a dup; the request it answered timed out
    "4610-only-dups": _ping(4600, af=4, dst_addr="62.2.16.24", dst_name="hsi.cablecom.ch", proto="ICMP",
                            avg=-1, dup=2, min=-1, max=-1, rcvd=0, sent=1, size=12, lts=130,
                            result=[{"srcaddr": "192.168.1.229", "x": "*"}, {"dup": 1, "rtt": 1635.423},
                                    {"dup": 1, "rtt": 1800.494}]),
    "4750-v6": _ping(4790, af=6, dst_addr="2001:67c:2e8:22::c100:68b", dst_name="www.ripe.net",
                     proto="ICMP", avg=15.3375, dup=0, min=15.012, max=15.663, rcvd=2, sent=3, size=48,
                     lts=12, group_id=1001, src_addr="2001:db8:1::5", ttl=58,
                     result=[{"rtt": 15.012}, {"x": "*"}, {"rtt": 15.663, "ttl": 57}]),
    "5000-v4": _ping(5020, af=4, dst_addr="34.140.152.85", dst_name="34.140.152.85", proto="ICMP",
                     src_addr="192.168.10.6", ttl=55, size=48, mver="2.2.1", lts=43, step=None,
                     avg=31.888657, dup=0, min=31.469868, max=32.286958, rcvd=3, sent=3,
                     result=[{"rtt": 31.469868}, {"rtt": 31.909145}, {"rtt": 32.286958}]),
    # a request that could not be sent counts as sent, unanswered
    "5000-sendto-error": _ping(5080, af=4, dst_addr="198.51.100.7", dst_name="hk1.example.net", proto="ICMP",
                               avg=38.2, dup=0, min=38.2, max=38.2, rcvd=1, sent=2, size=48,
                               result=[{"rtt": 38.2},
                                       {"error": "sendto failed: Network is unreachable"}]),
    # the probe could not resolve the name: no dst_addr, nothing sent
    "5000-dns-error": _ping(5080, af=4, dst_name="nonexistent.example.net", proto="ICMP", avg=-1, dup=0,
                            min=-1, max=-1, rcvd=0, sent=0, size=48,
                            result=[{"error": "dns resolution failed: non-recoverable failure in name "
                                              "resolution"}]),
}


def _hop(n: int, *replies: R) -> R:
    return {"hop": n, "result": list(replies)}


def _r(addr: str, rtt: float, **extra: Any) -> R:
    return {"from": addr, "rtt": rtt, "size": 28, "ttl": 250, **extra}


def _syn_ack(rtt: float) -> R:
    return {"from": "198.51.100.7", "rtt": rtt, "size": 0, "ttl": 52, "flags": "SA"}


X: R = {"x": "*"}

TRACES: dict[str, R] = {
    # 4400: no type; addr/name, mode UDP4, paris-id, srcaddr
    "4400-udp": _untyped(_trace(4430, addr="193.0.14.129", name="k.root-servers.net", mode="UDP4",
                                srcaddr="192.168.1.5", **{"paris-id": 1}, result=[
                                    _hop(1, _r("192.168.1.1", 0.512), _r("192.168.1.1", 0.433),
                                         _r("192.168.1.1", 0.47)),
                                    _hop(2, X, X, X),
                                    _hop(3, _r("80.249.208.1", 9.125), X, _r("80.249.208.1", 9.301)),
                                    _hop(4, _r("193.0.14.129", 10.002), _r("193.0.14.129", 10.114),
                                         _r("193.0.14.129", 9.987))])),
    # 4460: a late reply (no rtt) answers the probe before it, which had timed out
    "4460-icmp-late": _trace(4460, af=4, dst_addr="193.0.14.129", dst_name="k.root-servers.net",
                             src_addr="192.168.1.5", proto="ICMP", endtime=1763669810, result=[
                                 _hop(1, _r("192.168.1.1", 0.612), _r("192.168.1.1", 0.533),
                                      _r("192.168.1.1", 0.57)),
                                 _hop(2, X, {"late": 1, "from": "10.2.2.2", "ttl": 254, "size": 28},
                                      _r("10.2.2.2", 4.321), _r("10.2.2.2", 4.123)),
                                 _hop(3, _r("193.0.14.129", 10.202), _r("193.0.14.129", 10.314),
                                      _r("193.0.14.129", 10.187))]),
    # 4610: a duplicate reply; the destination host unreachable from the last router ("err": "H")
    "4610-udp-unreachable": _trace(4610, af=4, dst_addr="198.51.100.20", dst_name="198.51.100.20",
                                   src_addr="192.168.1.5", proto="UDP", lts=20, result=[
                                       _hop(1, _r("192.168.1.1", 0.512), _r("192.168.1.1", 0.433),
                                            _r("192.168.1.1", 0.47)),
                                       _hop(2, _r("59.43.130.197", 9.011),
                                            {"dup": True, **_r("59.43.130.197", 9.876)},
                                            _r("59.43.130.197", 9.402), X),
                                       _hop(3, _r("203.0.113.9", 40.101, err="H"), X,
                                            _r("203.0.113.9", 40.522, err="H"))]),
    # 4750: network unreachable, administratively prohibited and a numeric ICMP code
    "4750-icmp-errors": _trace(4790, af=4, dst_addr="198.51.100.30", dst_name="svc.example.net",
                               src_addr="192.168.1.5", proto="ICMP", lts=5, group_id=5001, result=[
                                   _hop(1, _r("192.168.1.1", 0.512), _r("192.168.1.1", 0.433),
                                        _r("192.168.1.1", 0.47)),
                                   _hop(2, _r("202.97.1.1", 8.5, err=13), _r("202.97.1.1", 8.75),
                                        _r("202.97.1.1", 8.625, err="N")),
                                   _hop(3, _r("198.51.100.30", 30.25, err="A"), _r("198.51.100.30", 30.5),
                                        X)]),
    # 5000, IPv6 UDP: MPLS extension objects, a reply with a changed inner TTL, the destination's port
    # unreachable (no err: that is how a UDP trace arrives)
    "5000-udp-v6": _trace(5020, af=6, dst_addr="2001:500:2f::f", dst_name="f.root-servers.net",
                          src_addr="2001:db8:1::5", proto="UDP", mver="2.2.1", lts=43, result=[
                              _hop(1, _r("2001:db8:1::1", 0.712), _r("2001:db8:1::1", 0.633),
                                   _r("2001:db8:1::1", 0.67)),
                              _hop(2, _r("2001:7f8:1::a500:6939:1", 5.125, icmpext={
                                  "version": 2, "rfc4884": 1, "obj": [{"class": 1, "type": 1, "mpls": [
                                      {"label": 24001, "exp": 0, "s": 1, "ttl": 1}]}]}),
                                   _r("2001:7f8:1::a500:6939:1", 5.25, ittl=2), X),
                              _hop(3, X, X, X),
                              _hop(4, _r("2001:500:2f::f", 12.5), _r("2001:500:2f::f", 12.75),
                                   _r("2001:500:2f::f", 12.625))]),
    # 5000, TCP: the destination answers SYN-ACK (flags), ECMP at hop 2
    "5000-tcp": _trace(5080, af=4, dst_addr="198.51.100.7", dst_name="hk1.example.net", src_addr="10.0.0.5",
                       proto="TCP", dst_port=443, mver="2.6.2", lts=1, result=[
                           _hop(1, _r("10.0.0.1", 0.3), _r("10.0.0.1", 0.25), _r("10.0.0.1", 0.375)),
                           _hop(2, _r("59.43.130.197", 9.0), _r("59.43.130.201", 9.5),
                                _r("59.43.130.197", 9.25)),
                           _hop(3, _syn_ack(38.125), _syn_ack(38.25), {"dup": True, **_syn_ack(39.0)},
                                _syn_ack(38.5))]),
    # 5000, IPv6 ICMP: a late reply and a duplicate at the destination
    "5000-icmp-v6-late-dup": _trace(5080, af=6, dst_addr="2001:67c:2e8:22::c100:68b", dst_name="www.ripe.net",
                                    src_addr="2001:db8:1::5", proto="ICMP", result=[
                                        _hop(1, _r("2001:db8:1::1", 0.5), X, _r("2001:db8:1::1", 0.625)),
                                        _hop(2, X, {"late": 2, "from": "2001:67c:2e8:22::c100:68b",
                                                    "ttl": 60, "size": 64},
                                             _r("2001:67c:2e8:22::c100:68b", 14.25),
                                             {"dup": True, **_r("2001:67c:2e8:22::c100:68b", 14.5)},
                                             _r("2001:67c:2e8:22::c100:68b", 14.125))]),
    # 5000: sending failed at the first hop (the probe stops there)
    "5000-sendto-error": _trace(5080, af=4, dst_addr="202.12.27.33", dst_name="202.12.27.33",
                                src_addr="185.81.99.40", proto="UDP", size=40, result=[
                                    _hop(1, {"error": "sendto failed: Operation not permitted"})]),
    # 5000: a hop-level error (no result list at that hop)
    "5000-hop-error": _trace(5080, af=6, dst_addr="2001:db8:ffff::1", dst_name="hitlist.example.net",
                             src_addr="fe80::1", proto="UDP", result=[
                                 {"hop": 1, "error": "bind failed: Invalid argument"}]),
    # 5000: the destination never answers; after the gap limit, the last-ditch probe at hop 255
    "5000-gap-255": _trace(5080, af=4, dst_addr="198.51.100.99", dst_name="dark.example.net",
                           src_addr="10.0.0.5", proto="ICMP", result=[
                               _hop(1, _r("10.0.0.1", 0.3), _r("10.0.0.1", 0.25), _r("10.0.0.1", 0.375)),
                               _hop(2, _r("59.43.187.22", 30.0), X, _r("59.43.187.22", 30.5)),
                               _hop(3, X, X, X), _hop(4, X, X, X), _hop(5, X, X, X), _hop(6, X, X, X),
                               _hop(7, X, X, X), _hop(255, X, X, X)]),
}

# Firmware 1 kept the traceroute command's text output; RIPE's parser calls it a legacy format it does
# not read, so its expectation is written out by hand (tests/unit/store/test_atlas.py).
TRACE_V1_TEXT: R = {"fw": 1, "prb_id": 21, "msm_id": 6001, "timestamp": 1332938930, "from": "62.194.83.50",
                    "result": (
        "traceroute to k.root-servers.net (193.0.14.129), 30 hops max, 38 byte packets\n"
        " 1  192.168.1.1  0.512 ms  0.433 ms  0.470 ms\n"
        " 2  * * *\n"
        " 3  80.249.208.1  9.125 ms *  80.249.208.2  9.301 ms\n"
        " 4  193.0.14.129  10.002 ms  10.114 ms  9.987 ms\n")}
