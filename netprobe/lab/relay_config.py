"""What `lab up`/`lab set` hand the relay (relay.json in the state dir); both sides use these models."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from netprobe.lab.state import RouteInfo

RELAY_CONFIG = "relay.json"
RELAY_APPLIED = "relay.applied"  # the generation the relay last applied: `lab set` waits for it
RELAY_LOG = "relay.log"


class RelayConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    generation: int
    seed: int | None = None
    routes: list[RouteInfo]

    def topology(self) -> list[tuple[object, ...]]:
        return [r.topology() for r in self.routes]


def read_config(state_dir: Path) -> RelayConfig:
    return RelayConfig.model_validate_json((state_dir / RELAY_CONFIG).read_text())


def write_config(state_dir: Path, config: RelayConfig) -> None:
    tmp = state_dir / (RELAY_CONFIG + ".tmp")
    tmp.write_text(config.model_dump_json(indent=1))
    tmp.replace(state_dir / RELAY_CONFIG)
