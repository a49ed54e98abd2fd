"""icmp probe: one round = `count` echo requests `interval` apart through the shared ICMP engine."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field

from netprobe.net.pacing import DEFAULT_MAX_RATE
from netprobe.probes.base import ProbeContext, ProbeRuntime, ProbeTarget
from netprobe.probes.results import ProbeResult, RttSummaryJson, record_of
from netprobe.probes.settings import ProbeSettings, RoundSettings
from netprobe.stats import RttStats, jitter, loss_pct, rtt_stats
from netprobe.times import utc_now


class IcmpSettings(RoundSettings):
    count: int = Field(default=20, ge=1, le=10_000, description="echo requests per round")
    size: int = Field(default=56, ge=16, le=65_000, description="ICMP payload bytes, like ping -s")
    # One cap for the whole agent (or command), not per target: config rejects it in [targets.icmp].
    max_rate: float = Field(default=DEFAULT_MAX_RATE, gt=0, le=1_000_000,
                            description="echo requests per second per address family, all targets together; "
                                        "requests over it wait their turn")


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

    def to_dict(self) -> dict[str, Any]:
        return self.fields_dict()

    @classmethod
    def json_layout(cls) -> Mapping[str, object]:
        # a RIPE Atlas summary-only ping (db import) keeps Atlas's own min/avg/max, no percentiles
        return {"rtt_ms": RttStats | RttSummaryJson | None}

    @classmethod
    def json_fields(cls, result: Mapping[str, Any]) -> dict[str, Any]:
        # Atlas's own min/avg/max stay in the JSON: the record's rtt_ms is its samples' stats (none)
        rtt = result.get("rtt_ms")
        return {"rtt_ms": record_of(RttStats, rtt) if rtt is not None and "p50" in rtt else None}


async def run(target: ProbeTarget, settings: IcmpSettings, ctx: ProbeContext) -> IcmpResult:
    started = utc_now()
    t0 = time.monotonic()
    resolved = await ctx.resolver.resolve(target.host, target.family)
    if resolved.error is not None:
        return IcmpResult(probe="icmp", host=target.host, started_at=started, status="error",
                          error_kind=resolved.error_kind, error=resolved.error,
                          duration_ms=(time.monotonic() - t0) * 1000)
    address = resolved.address
    assert address is not None
    outcome = await ctx.icmp_engine().ping(address, count=settings.count, interval=settings.interval,
                                           timeout=settings.timeout, size=settings.size)
    got = [s for s in outcome.samples if s is not None]
    return IcmpResult(
        probe="icmp", host=target.host, address=address, started_at=started,
        status="ok" if got else ("error" if outcome.error_kind else "down"),
        error_kind=outcome.error_kind, error=outcome.error,
        duration_ms=(time.monotonic() - t0) * 1000,
        sent=outcome.sent, received=len(got), duplicates=outcome.duplicates, late=outcome.late,
        loss_pct=loss_pct(outcome.sent, len(got)), rtt_ms=rtt_stats(got), jitter_ms=jitter(outcome.samples),
        samples_ms=list(outcome.samples),
    )



def _configure(ctx: ProbeContext, settings: ProbeSettings) -> None:
    if isinstance(settings, IcmpSettings):
        ctx.set_icmp_max_rate(settings.max_rate)   # one cap for the agent's engine, all targets together


def _startup(ctx: ProbeContext, used: bool) -> dict[str, str]:
    if not used:
        return {"icmp_socket": "-"}
    engine = ctx.icmp_engine()
    engine.open_default()  # fail fast (exit 2) when ICMP sockets are not permitted
    return {"icmp_socket": engine.socket_kind()}


RUNTIME = ProbeRuntime(settings_model=IcmpSettings, run=run, result_type=IcmpResult, configure=_configure,
                       startup=_startup)
