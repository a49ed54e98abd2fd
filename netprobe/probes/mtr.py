"""mtr probe: `cycles` rounds of TTL-limited probes; the path hop by hop, its loss, and its carrier line."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Literal

from pydantic import Field, model_validator

from netprobe.config.durations import Duration
from netprobe.mtr.engine import ProbeRecord
from netprobe.mtr.hops import Path, build_path, label_path
from netprobe.mtr.packets import PAYLOAD
from netprobe.probes.base import ProbeContext, ProbeSettings, ProbeSpec, ProbeTarget
from netprobe.probes.results import MtrResult
from netprobe.stats import jitter, rtt_stats
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
        return _result(base, path, target, ctx, t0, error_kind, error)

    progress = None if on_update is None else (lambda recs: on_update(finish(recs)))
    outcome = await ctx.trace_engine().trace(
        address, mode=settings.mode, port=settings.effective_port() or 0, cycles=settings.cycles,
        interval=settings.interval, timeout=settings.timeout, max_hops=settings.max_hops, on_cycle=progress)
    return finish(outcome.probes, outcome.error_kind, outcome.error)


def _result(base: MtrResult, path: Path, target: ProbeTarget, ctx: ProbeContext, t0: float,
            error_kind: str | None, error: str | None) -> MtrResult:
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
    result = MtrResult(
        probe="mtr", host=base.host, address=base.address, started_at=base.started_at,
        status="ok" if got else "down", error_kind=error_kind if not got else None,
        error=error if not got else None, duration_ms=(time.monotonic() - t0) * 1000,
        mode=base.mode, port=base.port, cycles=base.cycles, max_hops=base.max_hops, reached=path.reached,
        source=base.source, hops=path.hops, packet_size=size,
        route=replace(route, path_loss_pct=path.loss_pct, declared_line=target.line or None),
        sent=len(samples) if dest is not None else base.cycles, received=len(got), loss_pct=path.loss_pct,
        rtt_ms=rtt_stats(got), jitter_ms=jitter(samples), samples_ms=samples)
    return result


SPEC = ProbeSpec(name="mtr", settings_model=MtrSettings, run=run, result_type=MtrResult)
