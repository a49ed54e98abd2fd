"""Route classification (docs/probes.md): which China-carrier line an mtr path takes, from its hops' ASNs.

A hop's ASN comes from the GeoIP ASN database when it knows the address, else from the configured
prefix table (real CIDRs, longest prefix wins). The path's set of ASNs is then matched against the
rules in order; the first match gives the label, none gives "other". `[classification]` holds both
tables; a configured list replaces the built-in one as a whole.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
from collections.abc import Iterable, Sequence, Set
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, model_validator

from netprobe.config.base import StrictModel, as_tuple

if TYPE_CHECKING:
    from netprobe.net.geoip import GeoInfo, GeoIP

FALLBACK = "other"
SILENT = frozenset({"", "???", "*"})  # what an unanswered probe looks like in mtr output
_HOP_PLACEHOLDER = "*"

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def _check_cidr(value: str) -> str:
    try:
        return str(ipaddress.ip_network(value))
    except ValueError:
        pass
    try:
        loose = ipaddress.ip_network(value, strict=False)
    except ValueError:
        raise ValueError(f"{value!r} is not a valid network") from None
    raise ValueError(f"{value!r} is not a valid network: host bits are set (did you mean '{loose}'?)")


def _not_empty(value: tuple[str, ...]) -> tuple[str, ...]:
    # Not Field(min_length=1): that also fires when items were invalid, doubling the report.
    if not value:
        raise ValueError("must list at least one network")
    return value


Cidr = Annotated[str, AfterValidator(_check_cidr)]
Asn = Annotated[int, Field(ge=0, le=2**32 - 1)]
AsnList = Annotated[tuple[Asn, ...], BeforeValidator(as_tuple)]


class PrefixEntry(StrictModel):
    """One [[classification.prefixes]] entry: these networks belong to this ASN."""

    asn: Asn = Field(description="autonomous system number")
    org: str | None = Field(default=None, min_length=1, description="operator, for display")
    cidrs: Annotated[tuple[Cidr, ...], BeforeValidator(as_tuple), AfterValidator(_not_empty)] = Field(
        description="IPv4 or IPv6 networks, e.g. 59.43.0.0/16")


class LineRule(StrictModel):
    """One [[classification.rules]] entry: the label a path gets when its ASNs meet the conditions."""

    label: str = Field(min_length=1, max_length=64, description="line label, e.g. cn2-gia")
    all_of: AsnList = Field(default=(), description="every one of these ASNs is on the path")
    any_of: AsnList = Field(default=(), description="at least one of these ASNs is on the path")
    none_of: AsnList = Field(default=(), description="none of these ASNs is on the path")

    @model_validator(mode="after")
    def _has_condition(self) -> LineRule:
        if not self.all_of and not self.any_of:
            raise ValueError("a rule needs all_of or any_of: the ASNs that make a path this line")
        return self

    def matches(self, asns: Set[int]) -> bool:
        return (all(a in asns for a in self.all_of)
                and (not self.any_of or any(a in asns for a in self.any_of))
                and not any(a in asns for a in self.none_of))


def _prefix(asn: int, org: str, *cidrs: str) -> PrefixEntry:
    return PrefixEntry(asn=asn, org=org, cidrs=cidrs)


DEFAULT_PREFIXES: tuple[PrefixEntry, ...] = (
    _prefix(4809, "China Telecom CN2", "59.43.0.0/16"),
    _prefix(4134, "China Telecom 163 (ChinaNet)", "202.97.0.0/16"),
    _prefix(9929, "China Unicom 9929 (CUII)", "218.105.0.0/16", "210.51.0.0/16"),
    _prefix(4837, "China Unicom 4837", "219.158.0.0/16"),
    _prefix(58807, "China Mobile CMIN2", "223.120.16.0/23", "223.120.19.0/24", "223.120.130.0/23",
            "223.120.140.0/23"),
    _prefix(58453, "China Mobile International (CMI)", "223.118.0.0/15", "223.120.0.0/15"),
)
DEFAULT_RULES: tuple[LineRule, ...] = (
    LineRule(label="cn2-gia", all_of=(4809,), none_of=(4134,)),
    LineRule(label="cn2-gt", all_of=(4809, 4134)),
    LineRule(label="163", any_of=(4134,)),
    LineRule(label="cu-9929", any_of=(9929,)),
    LineRule(label="cu-4837", any_of=(4837,)),
    LineRule(label="cmin2", any_of=(58807,)),
    LineRule(label="cmi", any_of=(58453,)),
    LineRule(label="ctgnet", any_of=(23764,)),
)


class ClassificationConfig(StrictModel):
    """[classification]: the prefix → ASN table and the ASN → label rules (first match wins)."""

    prefixes: Annotated[tuple[PrefixEntry, ...], BeforeValidator(as_tuple)] = Field(
        default=DEFAULT_PREFIXES, description="prefix → ASN table; replaces the built-in one")
    rules: Annotated[tuple[LineRule, ...], BeforeValidator(as_tuple)] = Field(
        default=DEFAULT_RULES, description="label rules in order; replaces the built-in ones")

    @model_validator(mode="after")
    def _one_asn_per_network(self) -> ClassificationConfig:
        seen: dict[str, tuple[int, str]] = {}
        for i, entry in enumerate(self.prefixes):
            for j, cidr in enumerate(entry.cidrs):
                where = f"prefixes[{i}].cidrs[{j}]"
                first = seen.setdefault(cidr, (entry.asn, where))
                if first[0] != entry.asn:
                    raise ValueError(f"{where}: {cidr} is already mapped to AS{first[0]} by {first[1]}")
        return self


class LineClassifier:
    """Hop address → ASN (GeoIP, else the prefix table) and path ASNs → line label."""

    def __init__(self, config: ClassificationConfig) -> None:
        self.config = config
        self.labels: frozenset[str] = frozenset({rule.label for rule in config.rules} | {FALLBACK})
        # version → [(prefix length, {network as int: ASN})], longest first: a lookup is one dict
        # probe per distinct length, so the first hit is the longest match.
        tables: dict[int, dict[int, dict[int, int]]] = {4: {}, 6: {}}
        self._orgs: dict[int, str] = {}
        for entry in config.prefixes:
            for cidr in entry.cidrs:
                net = ipaddress.ip_network(cidr)
                tables[net.version].setdefault(net.prefixlen, {})[int(net.network_address)] = entry.asn
            if entry.org is not None:
                self._orgs.setdefault(entry.asn, entry.org)
        self._tables = {v: sorted(t.items(), reverse=True) for v, t in tables.items()}

    @classmethod
    def default(cls) -> LineClassifier:
        return cls(ClassificationConfig())

    def asn_of(self, address: str, geo: GeoInfo | None = None) -> int | None:
        """The hop's ASN: GeoIP's when it has one, else the longest configured prefix holding it."""
        if geo is not None and geo.asn is not None:
            return geo.asn
        ip = _parse(address)
        if ip is None:
            return None
        bits = ip.max_prefixlen
        value = int(ip)
        for length, networks in self._tables[ip.version]:
            asn = networks.get(value >> (bits - length) << (bits - length))
            if asn is not None:
                return asn
        return None

    def org_of(self, asn: int) -> str | None:
        """The organisation the prefix table names for `asn` (for display when GeoIP has none)."""
        return self._orgs.get(asn)

    def classify(self, asns: Iterable[int]) -> str:
        present = frozenset(asns)
        for rule in self.config.rules:
            if rule.matches(present):
                return rule.label
        return FALLBACK


@dataclass(frozen=True, slots=True)
class RouteVerdict:
    """One mtr round's route: the line it looks like, and (once the probe knows them) the path's loss
    and the line the target was sold as."""

    label: str | None  # None: a route read from JSON that named none (every key of one may be missing)
    asns: list[int]  # unique, in path order
    hash: str
    mismatch: bool  # the declared line is detectable and is not what was detected
    path_loss_pct: float | None = None
    declared_line: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The route of `probe mtr --json` and of the envelope (the keys the probe knows)."""
        d: dict[str, Any] = {"label": self.label, "asns": list(self.asns), "hash": self.hash}
        if self.path_loss_pct is not None:
            d.update(path_loss_pct=self.path_loss_pct, declared_line=self.declared_line,
                     mismatch=self.mismatch)
        return d


def path_hash(hops: Sequence[Sequence[str]]) -> str:
    """Stable 16-hex-digit hash of the hop sequence; a hop is the sorted set of addresses seen at it.

    Silent hops count as a placeholder (the responding routers' positions matter); trailing silent
    hops do not, since how far past the last answer a trace ran says nothing about the route.
    """
    normalized = [_hop(addresses) for addresses in hops]
    while normalized and normalized[-1] == [_HOP_PLACEHOLDER]:
        normalized.pop()
    encoded = json.dumps(normalized, separators=(",", ":")).encode()
    return hashlib.sha256(encoded).hexdigest()[:16]


def verdict(hop_addresses: Sequence[Sequence[str]], classifier: LineClassifier, geoip: GeoIP | None,
            declared_line: str = "") -> RouteVerdict:
    """Label, path ASNs and hash of one mtr round; `mismatch` compares with the line sold."""
    asns: list[int] = []
    for addresses in hop_addresses:
        for address in _hop(addresses):
            if address == _HOP_PLACEHOLDER:
                continue
            geo = geoip.lookup(address) if geoip is not None else None
            asn = classifier.asn_of(address, geo)
            if asn is not None and asn not in asns:
                asns.append(asn)
    label = classifier.classify(asns)
    declared = declared_line.strip().lower()
    answered = any(a not in SILENT for hop in hop_addresses for a in hop)
    # Without a single answering hop there is no evidence for any line, so no mismatch either.
    mismatch = answered and declared in classifier.labels and declared != label
    return RouteVerdict(label=label, asns=asns, hash=path_hash(hop_addresses), mismatch=mismatch)


def _parse(address: str) -> IPAddress | None:
    try:
        ip = ipaddress.ip_address(address.strip().strip("[]"))
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def _hop(addresses: Sequence[str]) -> list[str]:
    """Sorted, de-duplicated, normalized addresses of one hop; [placeholder] when it was silent."""
    seen = {_normal(a) for a in addresses if a.strip() not in SILENT}
    return sorted(seen) if seen else [_HOP_PLACEHOLDER]


def _normal(address: str) -> str:
    ip = _parse(address)
    return str(ip) if ip is not None else address.strip()
