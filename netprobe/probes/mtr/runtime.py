"""mtr probe: `cycles` rounds of TTL-limited probes; the path hop by hop, its loss, and its carrier line."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypedDict, TypeVar

from pydantic import Field, model_validator

from netprobe.config.durations import Duration
from netprobe.net.lines import RouteVerdict
from netprobe.probes.base import ProbeContext, ProbeRuntime, ProbeTarget, RouteSeen
from netprobe.probes.mtr.engine import ProbeRecord
from netprobe.probes.mtr.hops import Hop, Path, build_path, label_path
from netprobe.probes.mtr.packets import PAYLOAD
from netprobe.probes.results import ProbeResult
from netprobe.probes.settings import ProbeSettings
from netprobe.stats import RttStats, jitter, rtt_stats
from netprobe.times import utc_now

DEFAULT_PORTS = {"udp": 33434, "tcp": 443}


class MtrSettings(ProbeSettings):
    every: Duration = Field(default=300.0, gt=0, description="how often a trace runs")
    timeout: Duration = Field(default=2.0, gt=0, description="wait for late replies after the last cycle")
    cycles: int = Field(default=10, ge=1, le=1000, description="rounds of probes (mtr -c)")
    interval: Duration = Field(default=1.0, gt=0, description="time between cycles (mtr -i)")
    mode: Literal["icmp", "udp", "tcp"] = Field(default="icmp", description="probe protocol")
    port: int | None = Field(default=None, ge=1, le=65535,
                             description="destination port: udp 33434, tcp 443 when not given")
    max_hops: int = Field(default=30, ge=1, le=64, description="highest TTL probed (mtr -m)")

    @model_validator(mode="after")
    def _fits_in_every(self) -> MtrSettings:
        if self.round_seconds() > self.every:
            raise ValueError(f"a trace lasts cycles*interval+timeout = {self.round_seconds():g}s, longer "
                             f"than every ({self.every:g}s); lower cycles or interval, or raise every")
        return self

    def round_seconds(self) -> float:
        # each cycle's probes are spread over its interval, the last cycle's too
        return self.cycles * self.interval + self.timeout

    def effective_port(self) -> int | None:
        return self.port or DEFAULT_PORTS.get(self.mode)


class MtrHeaderJson(TypedDict):
    """mtr's report.mtr block."""

    src: str
    dst: str
    tos: int
    tests: int
    psize: str
    bitpattern: str


# One hop as mtr's JSON report writes it (netprobe.probes.mtr.hops.Hop.to_dict), keys as mtr spells them.
HubJson = TypedDict("HubJson", {
    "count": int, "host": str, "Loss%": float, "Snt": int, "Last": float, "Avg": float, "Best": float,
    "Wrst": float, "StDev": float, "Javg": float, "ASN": str, "org": str | None, "country": str | None,
    "addresses": list[str], "rate_limited": bool, "icmp_errors": dict[str, int],
    "samples_ms": list[float | None]})


class MtrReportJson(TypedDict):
    mtr: MtrHeaderJson
    hubs: list[HubJson]


class RouteJson(TypedDict, total=False):
    """The route verdict as the mtr probe writes it: the line's label, the path's ASNs and hash, and
    how it compares with the line the target was sold as. Every key may be missing: a round that never
    traced has none (`{}`), older agents wrote fewer, and readers skip a route without a hash."""

    label: str
    asns: list[int]
    hash: str
    path_loss_pct: float
    declared_line: str | None
    mismatch: bool


@dataclass(slots=True)
class MtrResult(ProbeResult):
    """mtr's report layout (`report.mtr`, `report.hubs[]`) plus the route verdict, and the destination's
    figures at top level under the icmp probe's names, so rollups and alerts treat it alike."""

    mode: str = "icmp"
    port: int | None = None
    cycles: int = 0
    max_hops: int = 0
    reached: bool = False
    source: str = ""                 # this host's name, as mtr's report.mtr.src
    packet_size: int = 64            # bytes on the wire per probe, as mtr's report.mtr.psize
    hops: list[Hop] = field(default_factory=list)
    route: RouteVerdict | None = None      # None: the round never traced (the name did not resolve)
    sent: int = 0                    # probes that reached the destination's TTL
    received: int = 0
    loss_pct: float = 0.0            # path loss = the destination's loss
    rtt_ms: RttStats | None = None   # destination RTT (last hop)
    jitter_ms: float | None = None
    samples_ms: list[float | None] = field(default_factory=list)

    @classmethod
    def json_layout(cls) -> Mapping[str, object]:
        return {"hops": None, "source": None, "packet_size": None, "report": MtrReportJson,
                "route": RouteJson}

    @classmethod
    def json_fields(cls, result: Mapping[str, Any]) -> dict[str, Any]:
        report = result.get("report") or {}
        header = report.get("mtr") or {}
        fields: dict[str, Any] = {"hops": [_hop(hub) for hub in report.get("hubs") or ()],
                                  "route": _route(result.get("route")),
                                  # not pinned in docs/api.md: only an explicit false says a round did
                                  # not reach (route events skip it); older agents did not write it
                                  "reached": result.get("reached", True)}
        if "src" in header:
            fields["source"] = header["src"]
        psize = header.get("psize")
        if isinstance(psize, str) and psize.isascii() and psize.isdigit():
            fields["packet_size"] = int(psize)
        return fields

    def to_dict(self) -> dict[str, Any]:
        d = ProbeResult.to_dict(self)
        d.update(
            mode=self.mode, port=self.port, cycles=self.cycles, max_hops=self.max_hops, reached=self.reached,
            sent=self.sent, received=self.received, loss_pct=self.loss_pct,
            rtt_ms=self.rtt_ms.to_dict() if self.rtt_ms else None, jitter_ms=self.jitter_ms,
            samples_ms=list(self.samples_ms),
            report={"mtr": {"src": self.source, "dst": self.host, "tos": 0, "tests": self.cycles,
                            "psize": str(self.packet_size), "bitpattern": "0x00"},
                    "hubs": [h.to_dict() for h in self.hops]},
            route=self.route.to_dict() if self.route is not None else {})
        return d


def _hop(hub: Mapping[str, Any]) -> Hop:
    """One hop of the report's hubs, as Hop.to_dict wrote it."""
    asn = hub.get("ASN")
    digits = asn[2:] if isinstance(asn, str) and asn.startswith("AS") else ""
    return Hop(count=hub["count"], addresses=list(hub.get("addresses") or ()),
               samples_ms=[v if v is None else float(v) for v in hub.get("samples_ms") or ()],
               rate_limited=hub.get("rate_limited") is True,
               asn=int(digits) if digits.isascii() and digits.isdigit() else None,
               org=hub.get("org"), country=hub.get("country"), icmp_errors=dict(hub.get("icmp_errors") or {}))


def _route(route: Mapping[str, Any] | None) -> RouteVerdict | None:
    """The route verdict; None for a round that never traced (`{}`) or a route without a hash, which
    no reader can use. A key left out reads as RouteVerdict.to_dict() leaves it out."""
    if not route or "hash" not in route:
        return None
    loss = route.get("path_loss_pct")
    return RouteVerdict(label=route.get("label"), asns=list(route.get("asns") or ()), hash=route["hash"],
                        mismatch=route.get("mismatch") is True,
                        path_loss_pct=None if loss is None else float(loss),
                        declared_line=route.get("declared_line"))


async def run(target: ProbeTarget, settings: MtrSettings, ctx: ProbeContext) -> MtrResult:
    return await trace(target, settings, ctx)


async def trace(target: ProbeTarget, settings: MtrSettings, ctx: ProbeContext,
                on_update: Callable[[MtrResult], None] | None = None) -> MtrResult:
    """One trace; `on_update` (the live table) gets the partial result after every cycle."""
    started = utc_now()
    t0 = time.monotonic()
    base = MtrResult(probe="mtr", host=target.host, started_at=started, status="error",
                     mode=settings.mode, port=settings.effective_port(), cycles=settings.cycles,
                     max_hops=settings.max_hops, source=socket.gethostname())
    resolved = await ctx.resolver.resolve(target.host, target.family)
    if resolved.error is not None:
        base.error_kind, base.error = resolved.error_kind, resolved.error
        base.duration_ms = (time.monotonic() - t0) * 1000
        return base
    address = resolved.address
    assert address is not None
    base.address = address

    def finish(records: list[ProbeRecord], error_kind: str | None = None,
               error: str | None = None) -> MtrResult:
        path = build_path(records, settings.cycles)
        return path_result(base, path, target, ctx, t0, error_kind, error)

    progress = None if on_update is None else (lambda recs: on_update(finish(recs)))
    outcome = await ctx.trace_engine().trace(
        address, mode=settings.mode, port=settings.effective_port() or 0, cycles=settings.cycles,
        interval=settings.interval, timeout=settings.timeout, max_hops=settings.max_hops, on_cycle=progress)
    return finish(outcome.probes, outcome.error_kind, outcome.error)


M = TypeVar("M", bound=MtrResult)


def path_result(base: M, path: Path, target: ProbeTarget, ctx: ProbeContext, t0: float,
                error_kind: str | None, error: str | None) -> M:
    """`base` (what the round is: probe, host, address, mode, …) completed with a traced path: the
    hops enriched and labelled here (docs/probes.md, this host's GeoIP and line rules), the destination's
    figures, the route verdict. Also rmtr's, for a path traced by a reflector."""
    route = label_path(path.hops, ctx.line_classifier(), ctx.geoip, target.line)
    dest = path.destination
    samples = list(dest.samples_ms) if dest is not None else []
    got = [s for s in samples if s is not None]
    v6 = base.address is not None and ":" in base.address
    size = (40 if v6 else 20) + (20 if base.mode == "tcp" else 8 + PAYLOAD)
    if error_kind is None and not path.reached:
        error_kind = "unreachable" if path.refused_at is not None else "no_reply"
        error = (f"refused at hop {path.refused_at}" if path.refused_at is not None
                 else "the destination did not answer")
    return replace(
        base, status="ok" if got else "down", error_kind=error_kind if not got else None,
        error=error if not got else None, duration_ms=(time.monotonic() - t0) * 1000, reached=path.reached,
        hops=path.hops, packet_size=size,
        route=replace(route, path_loss_pct=path.loss_pct, declared_line=target.line or None),
        sent=len(samples) if dest is not None else base.cycles, received=len(got), loss_pct=path.loss_pct,
        rtt_ms=rtt_stats(got), jitter_ms=jitter(samples), samples_ms=samples)


def route_seen(result: ProbeResult, sold_as: str | None) -> RouteSeen | None:
    """A round's route for route events; None for a round in error, one that did not reach its
    destination or one that never traced. Read as the round's JSON says it: RouteVerdict.to_dict()
    writes the declared line and the mismatch only once the path's loss is known, and without them
    the target's line (`sold_as`) is the declared one."""
    if not isinstance(result, MtrResult) or result.status == "error" or not result.reached:
        return None
    route = result.route
    if route is None:
        return None
    known = route.path_loss_pct is not None
    return RouteSeen(label=route.label, hash=route.hash, mismatch=known and route.mismatch,
                     asns=list(route.asns), declared=route.declared_line if known else sold_as,
                     hops=[list(hop.addresses) for hop in result.hops])


RUNTIME = ProbeRuntime(settings_model=MtrSettings, run=run, result_type=MtrResult, route_of=route_seen)
