"""owd probe (docs/probes.md): one round = `count` authenticated UDP requests `interval` apart to the
target's reflector (`netprobe target --udp`), each reply stamped by the kernel on arrival; the round's
figures tell the two directions apart (loss, delay variation, reordering, duplicates) and give
absolute one-way delays only when [reflector] clock_sync says both clocks are synchronised."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field

from netprobe.config.durations import Duration
from netprobe.probes import reflector
from netprobe.probes.base import (
    ProbeContext,
    ProbeRuntime,
    ProbeTarget,
)
from netprobe.probes.owd import client, packets
from netprobe.probes.owd.figures import DelayVar, figures
from netprobe.probes.results import ProbeResult, Status, count_problems
from netprobe.probes.settings import RoundSettings
from netprobe.stats import RttStats, jitter
from netprobe.times import utc_now

# the reflector answers at most 200 packets/s per agent (udp_reflector.Limits), a session 16,384
MIN_INTERVAL_S = 0.01
MAX_COUNT = 10_000


class OwdSettings(RoundSettings):
    count: int = Field(default=50, ge=1, le=MAX_COUNT, description="requests per round")
    interval: Duration = Field(default=0.2, ge=MIN_INTERVAL_S, description="time between requests "
                               "(the reflector answers at most 200 packets/s per agent)")
    timeout: Duration = Field(default=2.0, gt=0, description="how long a reply may take")
    port: int | None = Field(default=None, ge=1, le=65535,
                             description="the reflector's UDP port; default: its URL's port")


@dataclass(slots=True)
class OwdResult(ProbeResult):
    port: int = 0
    sent: int = 0
    received: int = 0
    loss_pct: float = 0.0
    fwd_loss_pct: float = 0.0
    ret_loss_pct: float = 0.0
    rtt_ms: RttStats | None = None
    jitter_ms: float | None = None
    fwd_delay_var_ms: DelayVar | None = None
    ret_delay_var_ms: DelayVar | None = None
    fwd_ms: float | None = None          # absolute, median; only with clock_sync
    ret_ms: float | None = None
    clock_sync: bool = False
    fwd_reordered: int = 0               # as the reflector counted them
    ret_reordered: int = 0               # as the agent saw replies arrive
    fwd_duplicates: int = 0
    ret_duplicates: int = 0
    bad_packets: int = 0                 # replies that failed authentication or did not belong
    samples_ms: list[float | None] = field(default_factory=list)

    @classmethod
    def json_problems(cls, result: Mapping[str, Any]) -> list[str]:
        problems = count_problems(result)
        fwd, ret, loss = (result.get(k, 0.0) for k in ("fwd_loss_pct", "ret_loss_pct", "loss_pct"))
        if fwd + ret > loss + 1e-6:
            problems.append(f"fwd_loss_pct + ret_loss_pct: {fwd + ret:g} exceeds loss_pct ({loss:g})")
        absolute = result.get("fwd_ms") is not None or result.get("ret_ms") is not None
        if absolute and not result.get("clock_sync"):
            problems.append("fwd_ms/ret_ms: absolute one-way delays without clock_sync")
        return problems

    def to_dict(self) -> dict[str, Any]:
        return self.fields_dict()


def destination(target: ProbeTarget, settings: OwdSettings) -> tuple[str, int]:
    """Where a round goes: the reflector URL's host and port (`probe owd HOST:PORT`: the target's)."""
    url = target.option(reflector.KEY)
    host, port = reflector.host_port(url) if isinstance(url, str) and url else (target.host, target.port or 0)
    return host, settings.port or port


async def run(target: ProbeTarget, settings: OwdSettings, ctx: ProbeContext) -> OwdResult:
    started = utc_now()
    t0 = time.monotonic()
    host, port = destination(target, settings)

    def failed(kind: str, error: str, address: str | None = None) -> OwdResult:
        return OwdResult(probe="owd", host=target.host, address=address, started_at=started, status="error",
                         port=port, error_kind=kind, error=error, duration_ms=(time.monotonic() - t0) * 1000)

    if ctx.reflector is None:
        return failed("config", "no reflector token ([reflector] token_file, or --token-file)")
    resolved = await ctx.resolver.resolve(host, target.family)
    if resolved.error is not None or resolved.address is None:
        return failed(resolved.error_kind or "dns", resolved.error or f"{host}: no address")
    address = resolved.address
    x = await client.exchange((address, port), packets.derive_key(ctx.reflector.token), settings.count,
                              settings.interval, settings.timeout)
    f = figures(x, clock_sync=ctx.reflector.clock_sync)
    status: Status = "ok" if f.received else ("error" if x.error else "down")
    return OwdResult(
        probe="owd", host=target.host, address=address, started_at=started, status=status, port=port,
        error_kind="unreachable" if x.error and not f.received else None, error=x.error,
        duration_ms=(time.monotonic() - t0) * 1000, sent=f.sent, received=f.received,
        loss_pct=f.loss_pct, fwd_loss_pct=f.fwd_loss_pct, ret_loss_pct=f.ret_loss_pct, rtt_ms=f.rtt,
        jitter_ms=jitter(f.samples_ms), fwd_delay_var_ms=f.fwd_delay_var, ret_delay_var_ms=f.ret_delay_var,
        fwd_ms=f.fwd_ms, ret_ms=f.ret_ms, clock_sync=ctx.reflector.clock_sync,
        fwd_reordered=f.reordered_fwd, ret_reordered=f.reordered_ret, fwd_duplicates=f.duplicates_fwd,
        ret_duplicates=f.duplicates_ret, bad_packets=x.bad,
        samples_ms=list(f.samples_ms))


def rollup_extras(result: ProbeResult) -> list[tuple[str, float]]:
    """Per round: requests lost in each direction (summed, over requests sent: the window's loss per
    direction, as loss_pct is), each direction's delay variation, the absolute delays when synced."""
    if not isinstance(result, OwdResult) or not result.sent:
        return []
    sent = result.sent
    out = [("owd_sent", float(sent)), ("owd_fwd_lost", result.fwd_loss_pct * sent / 100.0),
           ("owd_ret_lost", result.ret_loss_pct * sent / 100.0)]
    for name, var in (("fwd", result.fwd_delay_var_ms), ("ret", result.ret_delay_var_ms)):
        if var is not None:
            out += [(f"owd_{name}_var_p50_ms", var.p50), (f"owd_{name}_var_p95_ms", var.p95)]
    for name, delay in (("fwd", result.fwd_ms), ("ret", result.ret_ms)):
        if delay is not None:
            out.append((f"owd_{name}_ms", delay))
    return out


RUNTIME = ProbeRuntime(settings_model=OwdSettings, run=run, result_type=OwdResult,
                       target_options=(reflector.OPTION,), rollup_extras=rollup_extras)
