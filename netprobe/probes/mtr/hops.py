"""From probe records to mtr's per-hop table, and the one loss figure that is true for the path.

A router that answers only some of the probes that expire at it is rate-limiting its ICMP (routers
generate Time Exceeded in their slow path, with a budget); the probes it did not answer still went
on. So loss at a hop that later hops do not show is the router's, not the path's: flagged
`rate_limited` and never reported as path loss. Path loss is the destination's loss.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from netprobe.probes.mtr.engine import ProbeRecord
from netprobe.stats import jitter, loss_pct

if TYPE_CHECKING:
    from netprobe.net.geoip import GeoIP
    from netprobe.net.lines import LineClassifier, RouteVerdict

SILENT = "???"


@dataclass(slots=True)
class Hop:
    """One TTL of the path, with mtr's figures (ms) and netprobe's enrichment."""

    count: int                       # the TTL, 1-based (mtr's `count`)
    addresses: list[str]             # every responder seen at this TTL (ECMP), in order of first reply
    samples_ms: list[float | None]   # one per cycle that probed this TTL, None when unanswered
    rate_limited: bool = False
    asn: int | None = None
    org: str | None = None
    country: str | None = None
    # replies at this TTL that carried an ICMP error (Unreachable), by code: they count as answered,
    # with their RTT, as mtr counts them (Atlas codes N, H, A, P, p or the ICMP code as a number)
    icmp_errors: dict[str, int] = field(default_factory=dict)
    answered: list[float] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        self.answered = [v for v in self.samples_ms if v is not None]

    @property
    def host(self) -> str:
        return self.addresses[0] if self.addresses else SILENT

    @property
    def sent(self) -> int:
        return len(self.samples_ms)

    @property
    def loss_pct(self) -> float:
        return loss_pct(self.sent, len(self.answered))

    def to_dict(self) -> dict[str, Any]:
        got = self.answered
        n = len(got)
        avg = math.fsum(got) / n if n else 0.0
        # mtr's StDev is the sample standard deviation (n − 1); 0 below two replies, as mtr prints
        stdev = math.sqrt(math.fsum((v - avg) ** 2 for v in got) / (n - 1)) if n > 1 else 0.0
        last = next((v for v in reversed(self.samples_ms) if v is not None), 0.0)
        return {
            "count": self.count, "host": self.host, "Loss%": self.loss_pct, "Snt": self.sent,
            "Last": last, "Avg": avg, "Best": min(got) if got else 0.0, "Wrst": max(got) if got else 0.0,
            "StDev": stdev, "Javg": jitter(self.samples_ms) or 0.0,
            "ASN": f"AS{self.asn}" if self.asn is not None else "AS???", "org": self.org,
            "country": self.country, "addresses": list(self.addresses), "rate_limited": self.rate_limited,
            "icmp_errors": dict(self.icmp_errors), "samples_ms": list(self.samples_ms),
        }


@dataclass(slots=True)
class Path:
    hops: list[Hop]
    reached: bool
    refused_at: int | None = None    # TTL of a router that answered Unreachable

    @property
    def destination(self) -> Hop | None:
        return self.hops[-1] if self.reached and self.hops else None

    @property
    def loss_pct(self) -> float:
        """Path loss: the destination's loss; 100 when it never answered."""
        dest = self.destination
        return dest.loss_pct if dest is not None else 100.0


def build_path(records: Sequence[ProbeRecord], cycles: int) -> Path:
    """Per-hop table from one trace's probes: TTL 1 up to the destination (or the last responder)."""
    reached = [r.ttl for r in records if r.kind == "reached"]
    refused = [r.ttl for r in records if r.kind == "unreach"]
    answered = [r.ttl for r in records if r.kind is not None]
    if reached:
        last = min(reached)
    elif refused:
        last = min(refused)
    else:
        last = max(answered, default=0)
    hops = []
    for ttl in range(1, last + 1):
        samples: list[float | None] = [None] * cycles
        probed = [False] * cycles
        addresses: list[str] = []
        for r in records:
            if r.ttl != ttl:
                continue
            probed[r.cycle] = True
            if r.kind is not None:
                samples[r.cycle] = r.rtt_ms
                if r.responder is not None and r.responder not in addresses:
                    addresses.append(r.responder)
        hops.append(Hop(ttl, addresses, [s for s, p in zip(samples, probed, strict=True) if p]))
    flag_rate_limited(hops)
    return Path(hops, bool(reached), min(refused) if refused and not reached else None)


def flag_rate_limited(hops: Sequence[Hop]) -> None:
    """A hop whose loss exceeds the loss of some hop after it: that loss did not persist."""
    floor = math.inf
    for hop in reversed(hops):
        hop.rate_limited = hop.loss_pct > floor
        floor = min(floor, hop.loss_pct)


def label_path(hops: Sequence[Hop], classifier: LineClassifier, geoip: GeoIP | None,
               declared_line: str = "") -> RouteVerdict:
    """ASN, organisation and country of each responding hop (GeoIP first, else the prefix table), and
    the path's line verdict."""
    from netprobe.net.lines import verdict

    for hop in hops:
        if hop.addresses:
            geo = geoip.lookup(hop.host) if geoip is not None else None
            hop.asn = classifier.asn_of(hop.host, geo)
            if geo is not None:
                hop.org, hop.country = geo.org, geo.country
            if hop.org is None and hop.asn is not None:
                hop.org = classifier.org_of(hop.asn)
    return verdict([h.addresses for h in hops], classifier, geoip, declared_line)
