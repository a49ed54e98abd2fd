"""Route classification (docs/probes.md): labels, real-CIDR prefix matching, config errors,
path hash, verdict."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from netprobe.config.agent import parse_config
from netprobe.errors import ConfigError
from netprobe.net.geoip import GeoInfo, GeoIP
from netprobe.net.lines import (
    DEFAULT_RULES,
    FALLBACK,
    ClassificationConfig,
    LineClassifier,
    RouteVerdict,
    path_hash,
    verdict,
)
from tests.support.mmdb import write_asn_db

BASE = """
[agent]
id = "sh-ct-1"
region = "cn-east"
isp = "telecom"
timezone = "Asia/Shanghai"

[[targets]]
id = "hk-cn2"
host = "hk1.example.net"
probes = ["icmp"]
"""
CLASSIFIER = LineClassifier.default()


def classifier(toml: str) -> LineClassifier:
    return LineClassifier(parse_config(BASE + toml, source="t.toml").classification)


def problems(toml: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(BASE + toml, source="t.toml")
    assert info.value.exit_code == 2
    return info.value.problems


def hops(*addresses: str) -> list[list[str]]:
    return [[a] for a in addresses]


# A typical trace: home router, ISP access, then the carrier backbone, then the destination.
ACCESS = ("192.168.1.1", "100.64.0.1", "???", "61.152.1.1")


@pytest.mark.parametrize(("backbone", "label", "asns"), [
    (("59.43.1.1", "59.43.246.2"), "cn2-gia", [4809]),
    (("202.97.12.1", "59.43.1.1"), "cn2-gt", [4134, 4809]),
    (("59.43.1.1", "202.97.12.1"), "cn2-gt", [4809, 4134]),
    (("202.97.12.1", "202.97.94.2"), "163", [4134]),
    (("218.105.1.1",), "cu-9929", [9929]),
    (("210.51.3.4",), "cu-9929", [9929]),
    (("219.158.3.4", "218.105.1.1"), "cu-9929", [4837, 9929]),  # 9929 outranks 4837
    (("219.158.3.4",), "cu-4837", [4837]),
    (("223.120.16.1", "223.120.19.9"), "cmin2", [58807]),
    (("223.120.130.1", "223.120.141.255"), "cmin2", [58807]),
    (("223.118.0.1", "223.121.255.254"), "cmi", [58453]),
    (("223.120.18.1",), "cmi", [58453]),  # inside 223.120.0.0/15 but outside every CMIN2 block
    (("223.120.128.1",), "cmi", [58453]),
    (("203.0.113.9",), "other", []),
    ((), "other", []),
])
def test_every_default_label(backbone: tuple[str, ...], label: str, asns: list[int]) -> None:
    result = verdict(hops(*ACCESS, *backbone, "203.0.113.80"), CLASSIFIER, None)
    assert (result.label, result.asns) == (label, asns)


def test_classify_by_asn_sets() -> None:
    assert CLASSIFIER.classify([4809]) == "cn2-gia"
    assert CLASSIFIER.classify([4134, 4809, 4809]) == "cn2-gt"
    assert CLASSIFIER.classify(iter([4134])) == "163"
    assert CLASSIFIER.classify([23764]) == "ctgnet"
    assert CLASSIFIER.classify([4134, 23764]) == "163"  # first match wins
    assert CLASSIFIER.classify([]) == "other"
    assert CLASSIFIER.classify([13335]) == "other"
    known = {"cn2-gia", "cn2-gt", "163", "cu-9929", "cu-4837", "cmin2", "cmi", "ctgnet", "other"}
    assert {rule.label for rule in DEFAULT_RULES} | {FALLBACK} == known
    assert CLASSIFIER.labels == known


def test_longest_prefix_wins_cmin2_inside_cmi() -> None:
    assert CLASSIFIER.asn_of("223.120.16.0") == 58807
    assert CLASSIFIER.asn_of("223.120.17.255") == 58807
    assert CLASSIFIER.asn_of("223.120.18.0") == 58453
    assert CLASSIFIER.asn_of("223.120.19.0") == 58807
    assert CLASSIFIER.asn_of("223.120.20.0") == 58453
    assert CLASSIFIER.asn_of("223.119.0.1") == 58453
    assert CLASSIFIER.asn_of("223.122.0.1") is None


@pytest.mark.parametrize("address", ["59.4.3.1", "59.430.0.1", "5.94.3.1", "202.9.7.1", "219.15.8.1",
                                     "2001:db8::59:43", "???", "", "hop.example.net"])
def test_prefixes_are_networks_not_string_prefixes(address: str) -> None:
    assert CLASSIFIER.asn_of(address) is None


def test_ipv6_prefixes_and_mapped_addresses() -> None:
    c = classifier("""
[[classification.prefixes]]
asn = 4134
cidrs = ["240e::/20", "202.97.0.0/16"]
[[classification.prefixes]]
asn = 4809
org = "CN2"
cidrs = ["240e:100::/24"]
""")
    assert c.asn_of("240e:1::1") == 4134
    assert c.asn_of("240e:0100::1") == 4809
    assert c.asn_of("[240e:1ff:ffff::1]") == 4809
    assert c.asn_of("240f::1") is None
    assert c.asn_of("::ffff:202.97.1.1") == 4134
    assert c.asn_of("59.43.1.1") is None  # the configured list replaced the defaults
    assert c.org_of(4809) == "CN2" and c.org_of(4134) is None
    assert verdict([["240e:1::1"], ["240E:1FF::2"]], c, None).label == "cn2-gt"


def test_org_of_default_table() -> None:
    assert CLASSIFIER.org_of(4809) == "China Telecom CN2"
    assert CLASSIFIER.org_of(23764) is None


def test_asn_from_geoip_overrides_prefix_table() -> None:
    assert CLASSIFIER.asn_of("59.43.1.1", GeoInfo(asn=4134)) == 4134
    assert CLASSIFIER.asn_of("59.43.1.1", GeoInfo(asn=None, country="CN")) == 4809
    assert CLASSIFIER.asn_of("203.0.113.1", GeoInfo(asn=23764)) == 23764


def test_verdict_uses_geoip_database_before_prefixes(tmp_path: Path) -> None:
    db = write_asn_db(tmp_path / "asn.mmdb", {"59.43.0.0/16": (4134, "relabelled"),
                                              "69.194.160.0/20": (23764, "CTGNet")})
    with GeoIP(asn_db=db) as geo:
        path = hops("192.168.1.1", "59.43.1.1", "218.105.1.1", "69.194.160.7")
        result = verdict(path, CLASSIFIER, geo)
        # 59.43/16 comes from GeoIP (4134); 218.105/16 is unknown to GeoIP, so the table gives 9929.
        assert result.asns == [4134, 9929, 23764]
        assert result.label == "163"
        assert verdict(path, CLASSIFIER, None).label == "cn2-gia"


def test_rules_replace_defaults_prefixes_stay() -> None:
    c = classifier("""
[[classification.rules]]
label = "premium"
any_of = [4809, 9929]
none_of = [4134]
""")
    assert c.labels == {"premium", "other"}
    assert c.classify([9929]) == "premium"
    assert c.classify([4134]) == "other"
    assert c.asn_of("59.43.1.1") == 4809  # prefixes not configured: built-in table
    assert verdict(hops("59.43.1.1"), c, None, declared_line="premium").mismatch is False
    assert verdict(hops("202.97.1.1"), c, None, declared_line="premium").mismatch is True
    # cn2-gia is no label this classifier can give, so it cannot be contradicted.
    assert verdict(hops("202.97.1.1"), c, None, declared_line="cn2-gia").mismatch is False


def test_defaults_match_the_design_table() -> None:
    config = ClassificationConfig()
    table = {cidr: entry.asn for entry in config.prefixes for cidr in entry.cidrs}
    assert table == {
        "59.43.0.0/16": 4809, "202.97.0.0/16": 4134, "218.105.0.0/16": 9929, "210.51.0.0/16": 9929,
        "219.158.0.0/16": 4837, "223.120.16.0/23": 58807, "223.120.19.0/24": 58807,
        "223.120.130.0/23": 58807, "223.120.140.0/23": 58807, "223.118.0.0/15": 58453,
        "223.120.0.0/15": 58453}
    assert [r.label for r in config.rules] == ["cn2-gia", "cn2-gt", "163", "cu-9929", "cu-4837", "cmin2",
                                                "cmi", "ctgnet"]
    assert parse_config(BASE, source="t").classification == config


def test_bad_cidr_is_a_config_error_naming_the_path() -> None:
    found = problems("""
[[classification.prefixes]]
asn = 4809
cidrs = ["59.43.0.0/16"]
[[classification.prefixes]]
asn = 4134
cidrs = ["202.97.0.0/16"]
[[classification.prefixes]]
asn = 9929
cidrs = ["59.43.0.0/33", "218.105.0.1/16", "240e::/200", 5]
""")
    assert found == [
        "classification.prefixes[2].cidrs[0]: '59.43.0.0/33' is not a valid network",
        "classification.prefixes[2].cidrs[1]: '218.105.0.1/16' is not a valid network: host bits are set "
        "(did you mean '218.105.0.0/16'?)",
        "classification.prefixes[2].cidrs[2]: '240e::/200' is not a valid network",
        "classification.prefixes[2].cidrs[3]: Input should be a valid string (got 5)",
    ]


def test_other_classification_errors_name_their_paths() -> None:
    found = problems("""
[classification]
colour = "blue"
[[classification.prefixes]]
asn = true
cidrs = []
org = ""
[[classification.prefixes]]
asn = 4294967296
cidrs = ["59.43.0.0/16"]
prefix = "x"
[[classification.rules]]
label = "cn2-gia"
none_of = [4134]
[[classification.rules]]
label = ""
any_of = ["4809"]
""")
    paths = [p.split(": ")[0] for p in found]
    assert paths == ["classification.prefixes[0].asn", "classification.prefixes[0].org",
                     "classification.prefixes[0].cidrs", "classification.prefixes[1].asn",
                     "classification.prefixes[1].prefix", "classification.rules[0]",
                     "classification.rules[1].label", "classification.rules[1].any_of[0]",
                     "classification.colour"], found
    assert found[2].endswith(": must list at least one network")
    assert found[4].endswith(": unknown key; allowed: asn, org, cidrs")
    assert "a rule needs all_of or any_of" in found[5]
    assert found[-1].endswith(": unknown key; allowed: prefixes, rules")


def test_one_network_cannot_belong_to_two_asns() -> None:
    found = problems("""
[[classification.prefixes]]
asn = 4809
cidrs = ["59.43.0.0/16"]
[[classification.prefixes]]
asn = 4134
cidrs = ["202.97.0.0/16", "59.43.0.0/16"]
""")
    assert found == ["classification: prefixes[1].cidrs[1]: 59.43.0.0/16 is already mapped to AS4809 "
                     "by prefixes[0].cidrs[0]"]


def test_empty_lists_are_allowed() -> None:
    c = classifier("[classification]\nprefixes = []\nrules = []\n")
    assert c.asn_of("59.43.1.1") is None
    assert c.classify([4809]) == "other"


def test_geoip_section() -> None:
    config = parse_config(BASE + '[geoip]\nasn_db = "/var/lib/GeoIP/GeoLite2-ASN.mmdb"\n', source="t")
    assert config.geoip.asn_path == Path("/var/lib/GeoIP/GeoLite2-ASN.mmdb")
    assert config.geoip.city_path is None
    assert parse_config(BASE, source="t").geoip.asn_path is None
    found = problems('[geoip]\nasn_db = 5\ncity = "x"\n')
    assert [p.split(": ")[0] for p in found] == ["geoip.asn_db", "geoip.city"]


# ---------------------------------------------------------------------------------------------
# path_hash

PATH: list[list[str]] = [["192.168.1.1"], ["???"], ["59.43.1.1", "59.43.1.5"], ["203.0.113.80"]]


def test_path_hash_is_short_hex_and_stable() -> None:
    h = path_hash(PATH)
    assert re.fullmatch(r"[0-9a-f]{16}", h)
    assert path_hash([list(hop) for hop in PATH]) == h
    # ECMP order, duplicates, spelling of silence and of IPv6 addresses do not matter.
    assert path_hash([["192.168.1.1"], [""], ["59.43.1.5", "59.43.1.1", "59.43.1.1"], ["203.0.113.80"]]) == h
    assert path_hash([["192.168.1.1"], [], ("59.43.1.5", "59.43.1.1"), ["203.0.113.80", "???"]]) == h
    assert path_hash([["2001:DB8::1"]]) == path_hash([["2001:db8:0::1"]])


def test_path_hash_ignores_trailing_silent_hops_only() -> None:
    h = path_hash(PATH)
    assert path_hash([*PATH, ["???"], [], ["???", ""]]) == h
    assert path_hash([["???"], *PATH]) != h  # a leading silent hop shifts every router
    without_gap = [hop for hop in PATH if hop != ["???"]]
    assert path_hash(without_gap) != h


@pytest.mark.parametrize("changed", [
    [["192.168.1.1"], ["???"], ["59.43.1.1"], ["203.0.113.80"]],  # an ECMP branch gone
    [["192.168.1.1"], ["???"], ["59.43.1.1", "59.43.1.6"], ["203.0.113.80"]],
    [["192.168.1.1"], ["10.0.0.1"], ["59.43.1.1", "59.43.1.5"], ["203.0.113.80"]],  # silent hop answers
    [["192.168.1.1"], ["???"], ["203.0.113.80"], ["59.43.1.1", "59.43.1.5"]],  # order
    [["192.168.1.1", "???"], ["59.43.1.1", "59.43.1.5"], ["203.0.113.80"]],
])
def test_path_hash_changes_with_the_route(changed: Sequence[Sequence[str]]) -> None:
    assert path_hash(changed) != path_hash(PATH)


def test_path_hash_of_silent_or_empty_paths() -> None:
    assert path_hash([]) == path_hash([["???"], ["???"]])
    assert path_hash([]) != path_hash(PATH)


# ---------------------------------------------------------------------------------------------
# verdict and mismatch

CN2 = hops("192.168.1.1", "59.43.1.1", "203.0.113.80")


def test_verdict_dict_and_hash() -> None:
    result = verdict(CN2, CLASSIFIER, None, declared_line="cn2-gia")
    assert result == RouteVerdict(label="cn2-gia", asns=[4809], hash=path_hash(CN2), mismatch=False)
    assert result.to_dict() == {"label": "cn2-gia", "asns": [4809], "hash": path_hash(CN2)}


@pytest.mark.parametrize(("declared", "mismatch"), [
    ("cn2-gia", False),
    (" CN2-GIA ", False),
    ("cn2-gt", True),
    ("163", True),
    ("other", True),
    ("bgp", False),  # not a detectable label
    ("premium", False),
    ("", False),
])
def test_mismatch_only_for_detectable_declared_lines(declared: str, mismatch: bool) -> None:
    assert verdict(CN2, CLASSIFIER, None, declared_line=declared).mismatch is mismatch


def test_declared_premium_line_on_a_plain_path_is_a_mismatch() -> None:
    result = verdict(hops("202.97.1.1", "202.97.2.2"), CLASSIFIER, None, declared_line="cn2-gia")
    assert (result.label, result.mismatch) == ("163", True)
    ordinary = verdict(hops("203.0.113.1"), CLASSIFIER, None, declared_line="cmi")
    assert (ordinary.label, ordinary.mismatch) == ("other", True)


def test_no_answering_hop_is_no_evidence_of_a_mismatch() -> None:
    result = verdict([["???"], ["???"]], CLASSIFIER, None, declared_line="cn2-gia")
    assert (result.label, result.asns, result.mismatch) == ("other", [], False)


def test_verdict_asns_unique_in_path_order_across_ecmp() -> None:
    path = [["219.158.1.1"], ["218.105.1.1", "219.158.9.9"], ["???"], ["218.105.2.2"], ["59.43.1.1"]]
    assert verdict(path, CLASSIFIER, None).asns == [4837, 9929, 4809]
