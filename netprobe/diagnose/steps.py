"""The three measuring steps of `netprobe diagnose`, each returning a typed record.

1. the network floor: stored evening-peak figures when the database has them for the URL's host, else
   a live icmp round and an mtr trace (tcp connects when ICMP is not permitted or not answered);
2. one SSE request: TTFT, the server's share of it, TPOT or pacing, gaps, stalls;
3. the concurrency sweep: TTFT and TPOT per level.
Network failures are data here (status, error), never exceptions.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from netprobe.errors import SetupError, StorageError, UsageError
from netprobe.net.resolve import Resolver
from netprobe.probes.base import ProbeContext, ProbeTarget
from netprobe.probes.icmp.runtime import IcmpResult, IcmpSettings
from netprobe.probes.mtr.runtime import MtrResult, MtrSettings
from netprobe.probes.sse.runtime import SseResult, SseSettings
from netprobe.probes.tcp.runtime import TcpResult, TcpSettings

if TYPE_CHECKING:
    from netprobe.probes.sse.runtime import LoadLevel
    from netprobe.store.prefix import Sums
    from netprobe.store.store import Store

Source = Literal["stored", "live"]
Method = Literal["peak", "icmp", "tcp", "none"]
_ONE_OFF = 10**7   # `every` for a one-off run: the round always fits


def url_host_port(url: str) -> tuple[str, int]:
    """The URL's host (lower case, IPv6 without brackets) and port (80/443 when not given)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        port = parts.port
    except ValueError:
        raise UsageError(f"URL: bad port in {url!r}") from None
    return host, port or (443 if parts.scheme == "https" else 80)


# -- 1. the network floor ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class NetworkFloor:
    source: Source
    method: Method               # peak (stored rollups), icmp, tcp (connect time), none (nothing answered)
    host: str
    floor_ms: float | None       # RTT P95: what every round trip costs at least
    rtt_p50_ms: float | None
    loss_pct: float | None
    jitter_ms: float | None = None
    line: str | None = None      # live: mtr's route label; stored: detected line, else the declared one
    path_loss_pct: float | None = None   # live mtr: the destination's loss
    samples: int = 0             # live: echo requests or connects sent
    rounds: int | None = None    # stored: peak-window rounds behind the figures
    days: int | None = None
    window: str | None = None
    agent: str | None = None
    target: str | None = None
    delay_var_p50_ms: float | None = None   # stored sse emitter streams: the budget's jitter margin
    delay_var_p95_ms: float | None = None
    notes: tuple[str, ...] = ()
    error: str | None = None     # why there is no floor
    rtt_dist: tuple[tuple[float, float], ...] = ()   # (ms, weight): the RTTs behind the floor (attainment)

    def describe(self) -> str:
        if self.source == "stored":
            return (f"stored evening-peak data: {self.rounds} rounds over {self.days} days "
                    f"({self.window} agent-local), agent {self.agent}, target {self.target}")
        what = {"icmp": f"{self.samples} ICMP echoes", "tcp": f"{self.samples} TCP connects",
                "peak": "", "none": "nothing answered"}[self.method]
        return f"live to {self.host}, now, not the evening peak: {what}"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        del d["rtt_dist"]
        d["notes"] = list(self.notes)
        d["description"] = self.describe()
        return d


@dataclass(frozen=True, slots=True)
class LiveSettings:
    """How much a live measurement sends; small, it runs before every diagnosis without data."""

    count: int = 20              # echo requests …
    interval: float = 0.2        # … this far apart
    timeout: float = 2.0
    cycles: int = 5              # mtr cycles …
    cycle_interval: float = 0.5  # … this far apart
    tcp_count: int = 10          # connects when ICMP is not permitted or not answered


async def live_floor(url: str, live: LiveSettings = LiveSettings()) -> NetworkFloor:
    """icmp round and mtr trace to the URL's host (concurrently); tcp connects to its port as fallback."""
    from netprobe.probes.icmp import runtime as icmp
    from netprobe.probes.mtr import runtime as mtr
    from netprobe.probes.tcp import runtime as tcp

    host, port = url_host_port(url)
    target = ProbeTarget(id=host, host=host, port=port)
    ctx = ProbeContext(resolver=Resolver())
    notes: list[str] = []
    icmp_settings = IcmpSettings(count=live.count, interval=live.interval, timeout=live.timeout,
                                 every=_ONE_OFF)
    mtr_settings = MtrSettings(cycles=live.cycles, interval=live.cycle_interval, timeout=live.timeout,
                               every=_ONE_OFF)

    async def ping() -> IcmpResult | str:
        try:
            return await icmp.run(target, icmp_settings, ctx)
        except SetupError as exc:   # no raw socket and no ping socket: a fact of this host, not fatal
            return str(exc)

    async def trace() -> MtrResult | str:
        try:
            return await mtr.run(target, mtr_settings, ctx)
        except SetupError as exc:
            return str(exc)

    try:
        pinged, traced = await asyncio.gather(ping(), trace())
        line, path_loss = None, None
        if isinstance(traced, str):
            notes.append(f"mtr skipped: {traced}")
        else:
            route = traced.route
            line = route.label if route is not None else None
            path_loss = (route.path_loss_pct if route is not None and route.path_loss_pct is not None
                         else traced.loss_pct)
            if traced.status != "ok" and traced.error:
                notes.append(f"mtr: {traced.error}")
        if isinstance(pinged, IcmpResult) and pinged.rtt_ms is not None:
            return NetworkFloor(source="live", method="icmp", host=host, floor_ms=pinged.rtt_ms.p95,
                                rtt_p50_ms=pinged.rtt_ms.p50, loss_pct=pinged.loss_pct,
                                jitter_ms=pinged.jitter_ms, line=line, path_loss_pct=path_loss,
                                samples=pinged.sent, notes=tuple(notes),
                                rtt_dist=tuple((v, 1.0) for v in pinged.samples_ms if v is not None))
        if isinstance(pinged, IcmpResult) and pinged.error_kind == "dns":
            return NetworkFloor(source="live", method="none", host=host, floor_ms=None, rtt_p50_ms=None,
                                loss_pct=None, notes=tuple(notes), error=pinged.error or "DNS lookup failed")
        notes.append(f"ICMP not permitted ({pinged}); floor from TCP connects to port {port}"
                     if isinstance(pinged, str) else
                     f"no ICMP echo replies ({pinged.error or 'filtered?'}); floor from TCP connects "
                     f"to port {port}")
        connects = await tcp.run(target, TcpSettings(count=live.tcp_count, interval=live.interval,
                                                     timeout=max(live.timeout, 3.0), every=_ONE_OFF), ctx)
        return _from_tcp(host, port, connects, line, path_loss, notes)
    finally:
        await ctx.close()


def _from_tcp(host: str, port: int, r: TcpResult, line: str | None, path_loss: float | None,
              notes: list[str]) -> NetworkFloor:
    if r.connect_ms is None:
        failures = ", ".join(f"{k} {n}" for k, n in sorted(r.failures.items()))
        return NetworkFloor(source="live", method="none", host=host, floor_ms=None, rtt_p50_ms=None,
                            loss_pct=r.loss_pct if r.sent else None, line=line, path_loss_pct=path_loss,
                            samples=r.sent, notes=tuple(notes),
                            error=r.error or f"no TCP connect to {host}:{port} succeeded ({failures})")
    return NetworkFloor(source="live", method="tcp", host=host, floor_ms=r.connect_ms.p95,
                        rtt_p50_ms=r.connect_ms.p50, loss_pct=r.loss_pct, jitter_ms=r.jitter_ms, line=line,
                        path_loss_pct=path_loss, samples=r.sent, notes=tuple(notes),
                        rtt_dist=tuple((v, 1.0) for v in r.samples_ms if v is not None))


async def stored_floor(url: str, db: str | None, days: int, window: str) -> tuple[NetworkFloor | None, str]:
    """The evening-peak figures of a stored target whose host (or sse_url) is the URL's; None and the
    reason when there are none. `db` None: the agent's default database, only if it exists."""
    from netprobe.report.peak import peak_rows
    from netprobe.store.store import open_store
    from netprobe.store.urls import default_db_url, display_url, sqlite_file

    explicit = db is not None
    url_db = db if db is not None else default_db_url()
    path = sqlite_file(url_db)
    if path is not None and not path.exists():
        if explicit:    # opening would create an empty file: surely a typo
            raise UsageError(f"--db: no such database file {path}")
        return None, f"no agent database at {path}"
    shown = display_url(url_db)
    host, _ = url_host_port(url)
    try:
        # upgrade=False: a diagnosis only reads, it must not migrate a running agent's database
        store = await open_store(url_db, upgrade=False)
    except StorageError as exc:
        if explicit:
            raise
        return None, f"cannot read {shown}: {exc}"
    try:
        ids = await _matching_targets(store, url, host)
        if not ids:
            return None, f"{shown}: no target with host {host}"
        rows = [r for r in await peak_rows(store, days, window)
                if r.target in ids and r.peak.rtt_p95_ms is not None]
    except StorageError as exc:
        if explicit:
            raise
        return None, f"cannot read {shown}: {exc}"
    finally:
        await store.close()
    if not rows:
        return None, f"{shown}: no evening-peak ({window}) RTT for {host} in the last {days} days"
    # several agents or targets for one host: the best-measured one
    row = max(rows, key=lambda r: (r.peak.rounds, r.peak.rtt_p95_ms or 0.0))
    p = row.peak
    notes = (f"{len(rows)} agent × target rows match {host}; using the one with the most rounds",) \
        if len(rows) > 1 else ()
    return NetworkFloor(source="stored", method="peak", host=host, floor_ms=p.rtt_p95_ms,
                        rtt_p50_ms=p.rtt_p50_ms, loss_pct=p.loss_pct, jitter_ms=p.jitter_ms,
                        line=row.detected_line or row.line, rounds=p.rounds, days=days, window=window,
                        agent=row.agent, target=row.target, delay_var_p50_ms=p.figure("sse_delay_var_p50_ms"),
                        delay_var_p95_ms=p.figure("sse_delay_var_p95_ms"), notes=notes,
                        rtt_dist=_bins(p.merged.sums) if p.merged is not None else ()), ""


def _bins(sums: Sums) -> tuple[tuple[float, float], ...]:
    """A window's merged RTT bins as (ms, count)."""
    from netprobe.store.hour_arrays import bin_values

    values = bin_values(sums.pos_off, len(sums.pos)).tolist()
    return tuple((v, w) for v, w in zip(values, sums.pos, strict=True) if w > 0)


async def _matching_targets(store: Store, url: str, host: str) -> set[str]:
    from netprobe.store.fleet import load_target_options

    out = set()
    for target in await load_target_options(store):
        sse_url = target.options.get("sse_url")
        if (target.host or "").strip("[]").lower() == host or (sse_url and sse_url == url):
            out.add(target.id)
    return out


# -- 2. one request -----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class SingleRequest:
    mode: str
    status: str
    error_kind: str | None
    error: str | None
    http_status: int | None
    connect_ms: float | None
    ttfb_ms: float | None          # request written → response headers
    first_event_ms: float | None   # request written → first content event: TTFT less the handshakes
    server_ms: float | None        # first event − headers: the round trip is in both, so it cancels
    tpot_ms: float | None          # openai: time per output token; emitter: the pace of events
    gaps_ms: dict[str, float] | None
    stalls: int
    stall_ms_total: float
    events: int
    duration_s: float
    delay_var_p95_ms: float | None
    completed: bool

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def gap_p95_ms(self) -> float | None:
        return (self.gaps_ms or {}).get("p95")

    @property
    def stalls_per_min(self) -> float | None:
        return self.stalls * 60.0 / self.duration_s if self.duration_s > 0 else None

    @classmethod
    def of(cls, r: SseResult) -> SingleRequest:
        server = (max(0.0, r.first_event_ms - r.ttfb_ms)
                  if r.first_event_ms is not None and r.ttfb_ms is not None else None)
        return cls(mode=r.mode, status=r.status, error_kind=r.error_kind, error=r.error,
                   http_status=r.http_status, connect_ms=r.connect_ms, ttfb_ms=r.ttfb_ms,
                   first_event_ms=r.first_event_ms, server_ms=server, tpot_ms=r.tpot_ms,
                   gaps_ms=dict(r.gaps_ms) if r.gaps_ms else None, stalls=r.stalls,
                   stall_ms_total=r.stall_ms_total, events=r.events, duration_s=r.duration_s,
                   delay_var_p95_ms=(r.delay_var_ms or {}).get("p95"), completed=r.completed)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ok"] = self.ok
        return d


async def single_request(url: str, settings: SseSettings) -> SingleRequest:
    from netprobe.probes.sse import runtime as sse

    host, _ = url_host_port(url)
    ctx = ProbeContext(resolver=Resolver())
    try:
        result = await sse.run(ProbeTarget(id=url, host=host, url=url), settings, ctx)
    finally:
        await ctx.close()
    return SingleRequest.of(result)


# -- 3. the concurrency sweep -------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class SweepLevel:
    concurrency: int
    ttft_p50_ms: float | None     # first event, over the level's successful streams
    ttft_p95_ms: float | None
    tpot_p50_ms: float | None
    tpot_p95_ms: float | None
    errors: int
    error_kinds: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, level: LoadLevel) -> SweepLevel:
        ttft, tpot = level.ttft_ms, level.tpot_ms
        return cls(concurrency=level.concurrency, ttft_p50_ms=ttft.p50 if ttft else None,
                   ttft_p95_ms=ttft.p95 if ttft else None, tpot_p50_ms=tpot.p50 if tpot else None,
                   tpot_p95_ms=tpot.p95 if tpot else None, errors=level.errors,
                   error_kinds=dict(level.error_kinds))


@dataclass(frozen=True, slots=True)
class Sweep:
    levels: tuple[SweepLevel, ...] = ()
    skipped: str | None = None    # why it did not run


async def concurrency_sweep(url: str, settings: SseSettings, levels: list[int]) -> Sweep:
    from netprobe.probes.sse.runtime import sweep

    report = await sweep(url, settings, levels)
    return Sweep(levels=tuple(SweepLevel.of(lv) for lv in report.levels))

