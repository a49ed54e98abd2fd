"""Typed result records. Every probe returns one; a network failure is a status, not an exception."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from netprobe.stats import RttStats, loss_pct
from netprobe.times import iso, utc_now

if TYPE_CHECKING:
    from netprobe.mtr.hops import Hop
    from netprobe.net.lines import RouteVerdict

# ok: the target answered (possibly with some loss); down: the probe ran and the target failed
# (100 % loss, every connect refused); error: the probe could not run (name does not resolve, ...).
Status = Literal["ok", "down", "error"]


def new_result_id() -> str:
    """Client-generated unique id (time-ordered UUIDv7-like) that makes ingest idempotent."""
    ms = int(utc_now().timestamp() * 1000)
    rand = uuid.uuid4().int & ((1 << 74) - 1)
    value = (ms << 80) | (0x7 << 76) | ((rand >> 62) << 64) | (0b10 << 62) | (rand & ((1 << 62) - 1))
    return str(uuid.UUID(int=value))


@dataclass(slots=True)
class ProbeResult:
    """Fields common to every probe; subclasses add their own and extend to_dict()."""

    probe: str
    host: str
    started_at: datetime
    status: Status
    address: str | None = None
    duration_ms: float = 0.0
    error_kind: str | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "probe": self.probe,
            "host": self.host,
            "address": self.address,
            "started_at": iso(self.started_at),
            "duration_ms": self.duration_ms,
            "status": self.status,
            "error_kind": self.error_kind,
            "error": self.error,
        }

    # -- the JSON the envelope validator expects (netprobe.store.wire derives it from the fields) ----
    @classmethod
    def json_layout(cls) -> Mapping[str, object]:
        """Fields whose to_dict() JSON is not the attribute as it is: key -> that JSON's type, None
        for an attribute to_dict() does not write."""
        return {}

    @classmethod
    def json_problems(cls, result: Mapping[str, Any]) -> list[str]:
        """What the types cannot say about a well-typed to_dict(): "field: problem" each."""
        return count_problems(result)


def count_problems(result: Mapping[str, Any], *, answers_are_received: bool = True) -> list[str]:
    """A round's counts against each other: received ≤ sent, one sample per request (when samples were
    kept; `answers_are_received`: the answered ones are what was received), loss as stats.loss_pct."""
    problems: list[str] = []
    sent, received = result.get("sent", 0), result.get("received", 0)
    if received > sent:
        problems.append(f"received: {received} exceeds sent ({sent})")
    samples = result.get("samples_ms") or []
    if samples:
        if len(samples) != sent:
            problems.append(f"samples_ms: {len(samples)} samples for {sent} requests sent (one per request)")
        answered = sum(s is not None for s in samples)
        if answers_are_received and answered != received:
            problems.append(f"samples_ms: {answered} answered samples, but received is {received}")
    loss = result.get("loss_pct")
    if loss is not None and "sent" in result:
        # nothing sent: 0 % as defined, or 100 % as importers say of a round that could not send
        want = (loss_pct(sent, received),) if sent else (0.0, 100.0)
        if not any(abs(loss - w) <= 1e-9 * max(1.0, w) for w in want):
            problems.append(f"loss_pct: {loss} is not 100·(sent−received)/sent = {want[0]:g} "
                            f"(sent {sent}, received {received})")
    return problems


class RttSummaryJson(TypedDict):
    min: float
    avg: float
    max: float


@dataclass(slots=True)
class IcmpResult(ProbeResult):
    sent: int = 0
    received: int = 0
    duplicates: int = 0
    late: int = 0
    loss_pct: float = 0.0
    rtt_ms: RttStats | None = None
    jitter_ms: float | None = None
    samples_ms: list[float | None] = field(default_factory=list)

    @classmethod
    def json_layout(cls) -> Mapping[str, object]:
        # a RIPE Atlas summary-only ping (db import) keeps Atlas's own min/avg/max, no percentiles
        return {"rtt_ms": RttStats | RttSummaryJson | None}

    def to_dict(self) -> dict[str, Any]:
        d = ProbeResult.to_dict(self)
        d.update(sent=self.sent, received=self.received, duplicates=self.duplicates, late=self.late,
                 loss_pct=self.loss_pct, rtt_ms=self.rtt_ms.to_dict() if self.rtt_ms else None,
                 jitter_ms=self.jitter_ms, samples_ms=list(self.samples_ms))
        return d


TcpFailure = Literal["refused", "timeout", "unreachable", "reset", "dns"]


@dataclass(slots=True)
class TcpResult(ProbeResult):
    port: int = 0
    sent: int = 0
    received: int = 0          # successful connects
    loss_pct: float = 0.0      # failed connects, as a percentage
    dns_ms: float | None = None
    connect_ms: RttStats | None = None
    jitter_ms: float | None = None
    samples_ms: list[float | None] = field(default_factory=list)
    failures: dict[str, int] = field(default_factory=dict)   # TcpFailure -> count

    def to_dict(self) -> dict[str, Any]:
        d = ProbeResult.to_dict(self)
        d.update(port=self.port, sent=self.sent, received=self.received, loss_pct=self.loss_pct,
                 dns_ms=self.dns_ms, connect_ms=self.connect_ms.to_dict() if self.connect_ms else None,
                 jitter_ms=self.jitter_ms, samples_ms=list(self.samples_ms), failures=dict(self.failures))
        return d


class MtrHeaderJson(TypedDict):
    """mtr's report.mtr block."""

    src: str
    dst: str
    tos: int
    tests: int
    psize: str
    bitpattern: str


# One hop as mtr's JSON report writes it (netprobe.mtr.hops.Hop.to_dict), keys as mtr spells them.
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


@dataclass(slots=True)
class SseResult(ProbeResult):
    """One streamed response, timed the way a browser receives it (DESIGN §3 sse).

    `samples_ms` holds the one first-event time, so hourly rollups and percentiles of first-event
    time come out of the same sketch as icmp RTTs; `sent`/`received` count the stream as one request.
    """

    mode: str = "emitter"
    url: str = ""
    http_status: int | None = None
    dns_ms: float | None = None
    connect_ms: float | None = None
    tls_ms: float | None = None
    ttfb_ms: float | None = None          # request written -> response headers
    first_event_ms: float | None = None   # request written -> first content event
    first_reasoning_ms: float | None = None  # openai: first reasoning_content token
    first_content_ms: float | None = None    # openai: first content token
    events: int = 0                       # content events (tokens in openai mode)
    comments: int = 0
    gaps_ms: dict[str, float] | None = None
    stalls: int = 0
    stall_ms_total: float = 0.0
    delay_var_ms: dict[str, float] | None = None
    tpot_ms: float | None = None
    tokens: dict[str, int] | None = None  # openai: from `usage` when the server sends it
    duration_s: float = 0.0               # request written -> end of stream
    bytes: int = 0
    reused_connection: bool = False
    content_encoding: str | None = None
    content_type: str | None = None
    completed: bool = False
    sent: int = 0
    received: int = 0
    loss_pct: float = 0.0
    jitter_ms: float | None = None
    samples_ms: list[float | None] = field(default_factory=list)

    @classmethod
    def json_problems(cls, result: Mapping[str, Any]) -> list[str]:
        # a stream cut after its first event keeps that time, but was not received whole
        return count_problems(result, answers_are_received=False)

    def to_dict(self) -> dict[str, Any]:
        d = ProbeResult.to_dict(self)
        for name in ("mode", "url", "http_status", "dns_ms", "connect_ms", "tls_ms", "ttfb_ms",
                     "first_event_ms", "first_reasoning_ms", "first_content_ms", "events", "comments",
                     "gaps_ms", "stalls", "stall_ms_total", "delay_var_ms", "tpot_ms", "tokens", "duration_s",
                     "bytes", "reused_connection", "content_encoding", "content_type", "completed", "sent",
                     "received", "loss_pct", "jitter_ms", "samples_ms"):
            value = getattr(self, name)
            d[name] = (dict(value) if isinstance(value, dict) else list(value) if isinstance(value, list)
                       else value)
        return d


def envelope(result: ProbeResult, agent: dict[str, Any], target: dict[str, Any],
             result_id: str | None = None, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """The result envelope of DESIGN §7: what is stored, uploaded and imported. `body`: the result's
    to_dict() when the caller already has it."""
    return {
        "id": result_id or new_result_id(),
        "probe": result.probe,
        "started_at": iso(result.started_at),
        "agent": agent,
        "target": target,
        "result": body if body is not None else result.to_dict(),
    }
