"""The lab spec (TOML): routes from the agent to datacenters and their impairments."""

from __future__ import annotations

import ipaddress
import tomllib
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from netprobe.errors import ConfigError

MAX_ROUTES = 64  # 198.19.0.0/16 holds 64 route blocks of /22
MAX_HOPS = 30
NAME_PATTERN = r"^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$"

Percent = Annotated[float, Field(ge=0, le=100)]


class Impairment(BaseModel):
    """One direction of a route: agent → datacenter (forward) or back (reverse)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    delay_ms: float = Field(default=0.0, ge=0, le=10_000)
    jitter_ms: float = Field(default=0.0, ge=0, le=10_000)
    loss_pct: Percent = 0.0
    duplicate_pct: Percent = Field(default=0.0, description="packets delivered twice (a second copy "
                                   "right behind the first), as a misbehaving link or router does")


PROFILES = ("base", "peak")


class PeakProfile(BaseModel):
    """A route's evening-peak figures, applied by `lab up/set --profile peak` (the demo switches to
    them for the compressed evening). Directions not given keep their base figures."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rtt_ms: float | None = Field(default=None, ge=0, le=20_000, description="shorthand: split evenly")
    forward: Impairment | None = None
    reverse: Impairment | None = None

    @model_validator(mode="after")
    def _one_form(self) -> PeakProfile:
        if self.rtt_ms is not None and (self.forward is not None or self.reverse is not None):
            raise ValueError("give either rtt_ms or forward/reverse, not both")
        return self


class RouteSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=NAME_PATTERN, description="route id; also the host name <id>.lab")
    datacenter: str = Field(pattern=NAME_PATTERN)
    line: str = Field(min_length=1, max_length=32)
    tcp_ports: list[Annotated[int, Field(ge=1, le=65535)]] = Field(default_factory=lambda: [443, 80])
    rtt_ms: float | None = Field(default=None, ge=0, le=20_000, description="shorthand: split evenly")
    forward: Impairment | None = None
    reverse: Impairment | None = None
    hops: list[str] = Field(default_factory=list, max_length=MAX_HOPS)
    hops6: list[str] | None = None
    hop_loss_pct: Percent | list[Percent] = 0.0
    peak: PeakProfile | None = None

    @field_validator("tcp_ports")
    @classmethod
    def _unique_ports(cls, ports: list[int]) -> list[int]:
        if len(set(ports)) != len(ports):
            raise ValueError("ports must be unique")
        return ports

    @field_validator("hops")
    @classmethod
    def _ipv4_hops(cls, hops: list[str]) -> list[str]:
        for i, hop in enumerate(hops):
            try:
                ipaddress.IPv4Address(hop)
            except ValueError:
                raise ValueError(f"hops[{i}]: {hop!r} is not an IPv4 address") from None
        return hops

    @field_validator("hops6")
    @classmethod
    def _ipv6_hops(cls, hops: list[str] | None) -> list[str] | None:
        for i, hop in enumerate(hops or []):
            try:
                ipaddress.IPv6Address(hop)
            except ValueError:
                raise ValueError(f"hops6[{i}]: {hop!r} is not an IPv6 address") from None
        return hops

    @model_validator(mode="after")
    def _consistent(self) -> RouteSpec:
        if self.rtt_ms is not None and (self.forward is not None or self.reverse is not None):
            raise ValueError("give either rtt_ms or forward/reverse, not both")
        if self.hops6 is not None and len(self.hops6) != len(self.hops):
            raise ValueError(f"hops6 has {len(self.hops6)} entries, hops has {len(self.hops)}")
        if isinstance(self.hop_loss_pct, list) and len(self.hop_loss_pct) != len(self.hops):
            raise ValueError(f"hop_loss_pct has {len(self.hop_loss_pct)} entries, hops has {len(self.hops)}")
        return self

    def forward_impairment(self) -> Impairment:
        if self.forward is not None:
            return self.forward
        return Impairment(delay_ms=(self.rtt_ms or 0.0) / 2)

    def reverse_impairment(self) -> Impairment:
        if self.reverse is not None:
            return self.reverse
        return Impairment(delay_ms=(self.rtt_ms or 0.0) / 2)

    def with_profile(self, profile: str) -> RouteSpec:
        """This route as `profile` has it: the base figures, or the peak ones where given."""
        if profile == "base" or self.peak is None:
            return self
        p = self.peak
        if p.rtt_ms is not None:
            half = Impairment(delay_ms=p.rtt_ms / 2)
            return self.model_copy(update={"rtt_ms": None, "forward": half, "reverse": half})
        return self.model_copy(update={"rtt_ms": None, "forward": p.forward or self.forward_impairment(),
                                       "reverse": p.reverse or self.reverse_impairment()})

    def hop_losses(self) -> list[float]:
        if isinstance(self.hop_loss_pct, list):
            return list(self.hop_loss_pct)
        return [self.hop_loss_pct] * len(self.hops)


class LabGlobals(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    seed: int | None = Field(default=None, description="seed the relay's random loss/jitter")


class LabSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    lab: LabGlobals = Field(default_factory=LabGlobals)
    routes: list[RouteSpec] = Field(min_length=1, max_length=MAX_ROUTES)

    def with_profile(self, profile: str) -> LabSpec:
        if profile not in PROFILES:
            raise ConfigError([f"profile: {profile!r} is not one of {', '.join(PROFILES)}"])
        return self.model_copy(update={"routes": [r.with_profile(profile) for r in self.routes]})

    @model_validator(mode="after")
    def _unique_ids(self) -> LabSpec:
        seen: set[str] = set()
        for route in self.routes:
            if route.id in seen:
                raise ValueError(f"duplicate route id {route.id!r}")
            seen.add(route.id)
        return self


def _field_path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(spec)"


def parse_spec(data: dict[str, Any], source: str = "") -> LabSpec:
    """Validate a spec already parsed from TOML; errors name the field path."""
    try:
        return LabSpec.model_validate(data)
    except ValidationError as exc:
        problems = [f"{_field_path(err['loc'])}: {err['msg']}" for err in exc.errors()]
        raise ConfigError(problems, source) from None


def load_spec(path: Path) -> LabSpec:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([f"cannot read: {exc.strerror}"], str(path)) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([f"invalid TOML: {exc}"], str(path)) from None
    return parse_spec(data, str(path))
