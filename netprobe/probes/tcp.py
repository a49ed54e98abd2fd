"""tcp probe: `count` connects to host:port; SYN → established timed, DNS timed separately."""

from __future__ import annotations

from pydantic import Field

from netprobe.durations import Duration
from netprobe.probes.base import ProbeContext, ProbeSpec, ProbeTarget, RoundSettings
from netprobe.results import TcpResult


class TcpSettings(RoundSettings):
    count: int = Field(default=5, ge=1, le=1000, description="connects per round")
    interval: Duration = Field(default=1.0, gt=0, description="time between connects of a round")
    timeout: Duration = Field(default=3.0, gt=0, description="per connect timeout")
    port: int | None = Field(default=None, ge=1, le=65535, description="overrides the target's tcp_port")


async def run(target: ProbeTarget, settings: TcpSettings, ctx: ProbeContext) -> TcpResult:
    raise NotImplementedError


SPEC = ProbeSpec(name="tcp", settings_model=TcpSettings, run=run)
