"""The lab spec (TOML): routes from the agent to datacenters and their impairments."""

from __future__ import annotations

import ipaddress
import tomllib
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

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
    # The way back (datacenter → agent). Absent: as many routers as `hops`, silent (a trace from the
    # datacenter shows `*` for them); [] means none at all.
    return_hops: list[str] | None = Field(default=None, max_length=MAX_HOPS)
    return_hops6: list[str] | None = None
    return_hop_loss_pct: Percent | list[Percent] = 0.0
    peak: PeakProfile | None = None

    @field_validator("tcp_ports")
    @classmethod
    def _unique_ports(cls, ports: list[int]) -> list[int]:
        if len(set(ports)) != len(ports):
            raise ValueError("ports must be unique")
        return ports

    @field_validator("hops", "return_hops", "hops6", "return_hops6")
    @classmethod
    def _addresses(cls, hops: list[str] | None, info: ValidationInfo) -> list[str] | None:
        name = str(info.field_name)
        kind = ipaddress.IPv6Address if name.endswith("6") else ipaddress.IPv4Address
        for i, hop in enumerate(hops or []):
            try:
                kind(hop)
            except ValueError:
                family = "IPv6" if kind is ipaddress.IPv6Address else "IPv4"
                raise ValueError(f"{name}[{i}]: {hop!r} is not an {family} address") from None
        return hops

    @model_validator(mode="after")
    def _consistent(self) -> RouteSpec:
        if self.rtt_ms is not None and (self.forward is not None or self.reverse is not None):
            raise ValueError("give either rtt_ms or forward/reverse, not both")
        _same_length("hops6", self.hops6, "hops", self.hops)
        if isinstance(self.hop_loss_pct, list):
            _same_length("hop_loss_pct", self.hop_loss_pct, "hops", self.hops)
        if self.return_hops is None:
            if self.return_hops6 is not None:
                raise ValueError("return_hops6 needs return_hops (the IPv4 routers it pairs with)")
            if self.return_hop_loss_pct != 0.0:
                raise ValueError("return_hop_loss_pct needs return_hops")
            return self
        _same_length("return_hops6", self.return_hops6, "return_hops", self.return_hops)
        if isinstance(self.return_hop_loss_pct, list):
            _same_length("return_hop_loss_pct", self.return_hop_loss_pct, "return_hops", self.return_hops)
        return self

    def forward_impairment(self) -> Impairment:
        return self.forward if self.forward is not None else _half_rtt(self.rtt_ms)

    def reverse_impairment(self) -> Impairment:
        return self.reverse if self.reverse is not None else _half_rtt(self.rtt_ms)

    def with_profile(self, profile: str) -> RouteSpec:
        """This route as `profile` has it: the base figures, or the peak ones where given."""
        if profile == "base" or self.peak is None:
            return self
        p = self.peak
        if p.rtt_ms is not None:
            half = _half_rtt(p.rtt_ms)
            return self.model_copy(update={"rtt_ms": None, "forward": half, "reverse": half})
        return self.model_copy(update={"rtt_ms": None, "forward": p.forward or self.forward_impairment(),
                                       "reverse": p.reverse or self.reverse_impairment()})

    def hop_losses(self) -> list[float]:
        return _per_hop(self.hop_loss_pct, len(self.hops))

    def return_hop_losses(self) -> list[float]:
        return _per_hop(self.return_hop_loss_pct, len(self.return_hops or []))


def _half_rtt(rtt_ms: float | None) -> Impairment:
    """One direction of the rtt_ms shorthand: half the round trip as delay, nothing else."""
    return Impairment(delay_ms=(rtt_ms or 0.0) / 2)


def _same_length(name: str, values: list[Any] | None, base_name: str, base: list[str]) -> None:
    if values is not None and len(values) != len(base):
        raise ValueError(f"{name} has {len(values)} entries, {base_name} has {len(base)}")


def _per_hop(pct: float | list[float], n: int) -> list[float]:
    return list(pct) if isinstance(pct, list) else [pct] * n


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
