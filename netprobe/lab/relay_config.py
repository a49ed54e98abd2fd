"""What `lab up`/`lab set` hand the relay (relay.json in the state dir); both sides use these models."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from netprobe.lab.spec import Impairment

RELAY_CONFIG = "relay.json"
RELAY_APPLIED = "relay.applied"  # the generation the relay last applied: `lab set` waits for it
RELAY_LOG = "relay.log"


class RelayRoute(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    k: int
    id: str
    isp_ns: str
    dc_ns: str
    tun_isp: str
    tun_dc: str
    forward: Impairment
    reverse: Impairment
    hops: list[str]
    hops6: list[str]
    hop_loss_pct: list[float]
    return_hops: list[str] | None = None  # None: len(hops) silent routers on the way back
    return_hops6: list[str] = []
    return_hop_loss_pct: list[float] = []
    tcp_ports: list[int]


class RelayConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    generation: int
    seed: int | None = None
    routes: list[RelayRoute]

    def topology(self) -> list[tuple[object, ...]]:
        """What the relay cannot change while running (it owns fds built from these)."""
        return [(r.k, r.id, r.isp_ns, r.dc_ns, r.tun_isp, r.tun_dc, tuple(r.tcp_ports)) for r in self.routes]


def read_config(state_dir: Path) -> RelayConfig:
    return RelayConfig.model_validate_json((state_dir / RELAY_CONFIG).read_text())


def write_config(state_dir: Path, config: RelayConfig) -> None:
    tmp = state_dir / (RELAY_CONFIG + ".tmp")
    tmp.write_text(config.model_dump_json(indent=1))
    tmp.replace(state_dir / RELAY_CONFIG)
