"""The lab spec's per-direction hop lists (no root needed): validation names the field, defaults, and
the bundled asymmetric routes classify as the lines they emulate (docs/probes.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from netprobe.errors import ConfigError
from netprobe.lab.api import route_infos
from netprobe.lab.spec import load_spec, parse_spec
from netprobe.net.lines import LineClassifier, verdict

ROOT = Path(__file__).resolve().parents[3]


def spec(**route: Any) -> dict[str, Any]:
    return {"routes": [{"id": "r", "datacenter": "hk", "line": "cn2-gia", "rtt_ms": 10.0,
                        "hops": ["59.43.1.1", "59.43.1.2"], **route}]}


def problems(**route: Any) -> str:
    with pytest.raises(ConfigError) as err:
        parse_spec(spec(**route))
    return str(err.value)


@pytest.mark.parametrize(("route", "needle"), [
    ({"return_hops": ["202.97.1.1", "nope"]}, "routes[0].return_hops: Value error, return_hops[1]: 'nope' is "
                                              "not an IPv4 address"),
    ({"return_hops": ["202.97.1.1"], "return_hops6": ["202.97.1.1"]}, "return_hops6[0]: '202.97.1.1' is not "
                                                                      "an IPv6 address"),
    ({"return_hops": ["202.97.1.1"], "return_hops6": ["2001:2:0:fd00::1", "2001:2:0:fd00::2"]},
     "return_hops6 has 2 entries, return_hops has 1"),
    ({"return_hops": ["202.97.1.1"], "return_hop_loss_pct": [1.0, 2.0]},
     "return_hop_loss_pct has 2 entries, return_hops has 1"),
    ({"return_hops6": ["2001:2:0:fd00::1"]}, "return_hops6 needs return_hops"),
    ({"return_hop_loss_pct": 5.0}, "return_hop_loss_pct needs return_hops"),
    ({"return_hops": ["202.97.1.1"], "return_hop_loss_pct": 101.0}, "routes[0].return_hop_loss_pct"),
    ({"return_hops": ["202.97.1.1"] * 31}, "routes[0].return_hops: List should have at most 30 items"),
    ({"hops6": ["2001:2:0:fd00::1"]}, "hops6 has 1 entries, hops has 2"),
])
def test_bad_return_hops_name_the_field(route: dict[str, Any], needle: str) -> None:
    assert needle in problems(**route)


def test_without_return_hops_the_way_back_is_as_before() -> None:
    """No return_hops: the relay is told none (it keeps len(hops) silent routers on the way back)."""
    (info,) = route_infos(parse_spec(spec()))
    assert info.return_hops is None and info.return_hops6 is None and info.return_hop_loss_pct == []
    assert info.hops == ["59.43.1.1", "59.43.1.2"]


def test_return_hops_and_their_defaults() -> None:
    (info,) = route_infos(parse_spec(spec(return_hops=["202.97.1.1", "202.97.1.2", "202.97.1.3"],
                                          return_hop_loss_pct=10.0)))
    assert info.return_hops == ["202.97.1.1", "202.97.1.2", "202.97.1.3"]
    # numbered apart from the forward hops' 2001:2:0:ffKK:: and the unrouted 2001:2:0:fffe::1
    assert info.return_hops6 == ["2001:2:0:fe00::1", "2001:2:0:fe00::2", "2001:2:0:fe00::3"]
    assert info.return_hop_loss_pct == [10.0, 10.0, 10.0]
    assert not set(info.return_hops6) & set(info.hops6)
    (none,) = route_infos(parse_spec(spec(return_hops=[])))
    assert none.return_hops == [] and none.return_hops6 == []
    (given,) = route_infos(parse_spec(spec(return_hops=["202.97.1.1"], return_hops6=["2001:2:0:fd00::9"],
                                           return_hop_loss_pct=[30.0])))
    assert given.return_hops6 == ["2001:2:0:fd00::9"] and given.return_hop_loss_pct == [30.0]


def _label(addresses: list[str]) -> str:
    return verdict([[a] for a in addresses], LineClassifier.default(), None).label


def test_bundled_asymmetric_routes_classify_per_direction() -> None:
    """agents/lab.toml: forward CN2 GIA / return 163, forward 163 / return CN2 GT; the routes that were
    there keep no return_hops (their way back is what it was)."""
    routes = {r.id: r for r in load_spec(ROOT / "agents" / "lab.toml").routes}
    gia = routes["hk-gia-163"]
    assert gia.return_hops is not None
    assert (_label(gia.hops), _label(gia.return_hops)) == ("cn2-gia", "163")
    gt = routes["la-163-gt"]
    assert gt.return_hops is not None
    assert (_label(gt.hops), _label(gt.return_hops)) == ("163", "cn2-gt")
    assert [r.id for r in routes.values() if r.return_hops is not None] == ["hk-gia-163", "la-163-gt"]


def test_bundled_asymmetric_peaks_congest_one_direction() -> None:
    """Each asymmetric route's peak moves only its 163 direction; the other keeps its base figures."""
    spec = load_spec(ROOT / "agents" / "lab.toml")
    base = {r.id: r for r in spec.routes}
    peak = {r.id: r for r in spec.with_profile("peak").routes}
    for rid, congested in (("hk-gia-163", "reverse"), ("la-163-gt", "forward")):
        calm = "forward" if congested == "reverse" else "reverse"
        b, p = base[rid], peak[rid]
        assert getattr(p, f"{calm}_impairment")() == getattr(b, f"{calm}_impairment")(), rid
        worse, before = getattr(p, f"{congested}_impairment")(), getattr(b, f"{congested}_impairment")()
        assert worse.loss_pct >= 5 * before.loss_pct and worse.jitter_ms > 2 * before.jitter_ms, rid
        assert worse.delay_ms > before.delay_ms, rid
