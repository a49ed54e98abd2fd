"""[[targets]]: the keys every target has, and the model with the keys the registered probes add
(their specs' target_options: tcp_port, sse_url, reflector, …)."""

from __future__ import annotations

import ipaddress
import socket
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)

from netprobe.config.base import Ident, StrictModel, as_tuple
from netprobe.probes import REGISTRY, ProbeTarget
from netprobe.probes.base import TargetOption

_FAMILIES = {"any": 0, "ipv4": socket.AF_INET, "ipv6": socket.AF_INET6}


class TargetConfig(StrictModel):
    """One [[targets]] entry. Per-probe overrides ([targets.icmp] …) are held by Config, not here."""

    id: Ident = Field(description="unique among targets")
    host: str = Field(min_length=1, max_length=253, description="name or address literal")
    datacenter: str = Field(default="", description="candidate datacenter, e.g. hk")
    line: str = Field(default="", description="the line it was sold as, e.g. cn2-gia")
    probes: Annotated[tuple[str, ...], BeforeValidator(as_tuple)] = Field(
        min_length=1, description="probes run against this target")
    # ... then the keys the registered probes add (tcp_port, sse_url: their specs' target_options);
    # target_model() builds the model that has them.
    family: Literal["any", "ipv4", "ipv6"] = Field(default="any", description="address family to use")
    enabled: bool = Field(default=True, description="false keeps the target configured but unprobed")

    @field_validator("host")
    @classmethod
    def _host(cls, value: str) -> str:
        if value != value.strip() or any(c.isspace() for c in value):
            raise ValueError(f"{value!r} contains whitespace")
        return value

    @field_validator("probes")
    @classmethod
    def _probes(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        # Per-item errors (unknown probe names) are reported by Config with their index.
        if len(set(value)) != len(value):
            raise ValueError("a probe is listed twice")
        return value

    @model_validator(mode="after")
    def _required_options(self) -> TargetConfig:
        for probe in self.probes:
            spec = REGISTRY.get(probe)
            for option in spec.target_options if spec is not None else ():
                if option.required and not getattr(self, option.key):
                    raise ValueError(f"{option.key}: required when probes include {probe}")
        return self

    @field_validator("family")
    @classmethod
    def _family_matches_literal(cls, value: str, info: ValidationInfo) -> str:
        host = info.data.get("host")
        try:
            address = ipaddress.ip_address(str(host).strip("[]"))
        except ValueError:
            return value
        wanted = {"ipv4": 4, "ipv6": 6}.get(value)
        if wanted is not None and address.version != wanted:
            raise ValueError(f"host {host} is an IPv{address.version} address but family is {value!r}")
        return value

    def option(self, key: str) -> object:
        """The value of a probe's target option (tcp_port, sse_url, …); None for a key no probe adds."""
        return getattr(self, key, None)

    def to_probe_target(self) -> ProbeTarget:
        # the probes' options fill ProbeTarget's slots (port, url): a probe it runs first, in its order,
        # then the others (registry order), so two probes adding a port do not take each other's
        port: int | None = None
        url: str | None = None
        options: dict[str, object] = {}
        order = [*(p for p in self.probes if p in REGISTRY), *(p for p in REGISTRY if p not in self.probes)]
        for probe in order:
            for o in REGISTRY[probe].target_options:
                value = getattr(self, o.key)
                if value is not None:
                    options[o.key] = value
                if o.fills == "port" and port is None and isinstance(value, int):
                    port = value
                elif o.fills == "url" and url is None and isinstance(value, str):
                    url = value
        return ProbeTarget(id=self.id, host=self.host.strip("[]"), port=port, url=url,
                           datacenter=self.datacenter, line=self.line, family=_FAMILIES[self.family],
                           options=options)

    @classmethod
    def key_order(cls) -> list[str]:
        """Its keys as a message lists them: the probes' options right after `probes`."""
        keys = list(cls.model_fields)
        options = [k for k in keys if k not in TargetConfig.model_fields]
        common = [k for k in keys if k in TargetConfig.model_fields]
        at = common.index("probes") + 1
        return [*common[:at], *options, *common[at:]]


_TARGET_MODELS: dict[tuple[object, ...], type[TargetConfig]] = {}


def target_model() -> type[TargetConfig]:
    """TargetConfig with the target options of every registered probe (built once per registry)."""
    by_key: dict[str, TargetOption] = {}
    for spec in REGISTRY.values():
        for o in spec.target_options:
            if by_key.setdefault(o.key, o) is not o:
                raise TypeError(f"target option {o.key!r} of probe {spec.name!r} is another probe's key; "
                                "probes that share a key share its TargetOption")
    options = tuple(by_key.values())
    model = _TARGET_MODELS.get(options)
    if model is None:
        fields: dict[str, Any] = {
            o.key: (o.annotation if o.check is None else Annotated[o.annotation, AfterValidator(o.check)],
                    o.field)
            for o in options}
        model = _TARGET_MODELS[options] = create_model("TargetConfig", __base__=TargetConfig, **fields)
    return model
