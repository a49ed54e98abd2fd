"""The one signature every probe implements, and what a probe run is given."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator

from netprobe.config.durations import Duration
from netprobe.probes.results import ProbeResult

if TYPE_CHECKING:
    import asyncio

    from netprobe.icmp.engine import IcmpEngine
    from netprobe.mtr.engine import TraceEngine
    from netprobe.net.geoip import GeoIP
    from netprobe.net.lines import LineClassifier
    from netprobe.net.resolve import Resolver


class ProbeSettings(BaseModel):
    """Settings every probe shares; each probe module subclasses it with its own fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    every: Duration = Field(default=60.0, gt=0, description="how often a round runs")
    timeout: Duration = Field(default=2.0, gt=0, description="per request/connect timeout")

    def round_seconds(self) -> float:
        """Upper bound of one round's duration; the scheduler cancels a run past this plus slack."""
        return self.timeout


class RoundSettings(ProbeSettings):
    """A round of `count` requests `interval` apart; it must fit inside `every`."""

    count: int = Field(default=20, ge=1, le=10_000, description="requests per round")
    interval: Duration = Field(default=0.5, gt=0, description="time between requests of a round")

    @model_validator(mode="after")
    def _fits_in_every(self) -> RoundSettings:
        if self.interval >= self.every:
            raise ValueError(f"interval ({self.interval:g}s) must be shorter than every ({self.every:g}s)")
        if self.round_seconds() > self.every:
            raise ValueError(
                f"a round lasts (count-1)*interval+timeout = {self.round_seconds():g}s, longer than "
                f"every ({self.every:g}s); lower count or interval, or raise every")
        return self

    def round_seconds(self) -> float:
        return (self.count - 1) * self.interval + self.timeout


@dataclass(frozen=True, slots=True)
class ProbeTarget:
    """What a probe aims at. `host` is a name or an address literal."""

    id: str
    host: str
    port: int | None = None
    url: str | None = None
    datacenter: str = ""
    line: str = ""
    family: int = 0  # 0 = any, socket.AF_INET, socket.AF_INET6

    def as_envelope(self) -> dict[str, Any]:
        return {"id": self.id, "host": self.host, "datacenter": self.datacenter, "line": self.line}


class ContextProvider(Protocol):
    def icmp_engine(self) -> IcmpEngine: ...
    @property
    def resolver(self) -> Resolver: ...


@dataclass
class ProbeContext:
    """Shared, long-lived resources handed to every run (one ICMP engine, one resolver cache, GeoIP
    and the line rules for mtr)."""

    resolver: Resolver
    geoip: GeoIP | None = None
    classifier: LineClassifier | None = None
    icmp_max_rate: float | None = None  # the ICMP engine's per-family send cap; None: its default
    tcp_slots: asyncio.Semaphore | None = None  # caps sockets open at once (CLI: the fd limit)
    _icmp: IcmpEngine | None = field(default=None, repr=False)
    _trace: TraceEngine | None = field(default=None, repr=False)

    def trace_engine(self) -> TraceEngine:
        if self._trace is None:
            from netprobe.mtr.engine import TraceEngine

            self._trace = TraceEngine()
        return self._trace

    def line_classifier(self) -> LineClassifier:
        if self.classifier is None:
            from netprobe.net.lines import LineClassifier

            self.classifier = LineClassifier.default()
        return self.classifier

    def icmp_engine(self) -> IcmpEngine:
        if self._icmp is None:
            from netprobe.icmp.engine import IcmpEngine

            rate = self.icmp_max_rate
            self._icmp = IcmpEngine() if rate is None else IcmpEngine(max_rate=rate)
        return self._icmp

    def set_icmp_max_rate(self, rate: float) -> None:
        """A new cap (agent reload): applied to the running engine too, queued requests kept."""
        self.icmp_max_rate = rate
        if self._icmp is not None:
            self._icmp.set_max_rate(rate)

    async def close(self) -> None:
        if self._icmp is not None:
            self._icmp.close()
            self._icmp = None
        if self._trace is not None:
            self._trace.close()
            self._trace = None
        if self.geoip is not None:
            self.geoip.close()


ProbeRun = Callable[[ProbeTarget, Any, ProbeContext], Awaitable[ProbeResult]]


@dataclass(frozen=True, slots=True)
class ProbeSpec:
    """One registry entry: a name, its settings model, `async run(target, settings, ctx)`, and the type
    of what it returns (the envelope validator is derived from it)."""

    name: str
    settings_model: type[ProbeSettings]
    run: ProbeRun
    result_type: type[ProbeResult] = ProbeResult     # what a probe adds to the common fields
