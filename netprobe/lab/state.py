"""What a running lab looks like: state.json in the state dir, read by tests, CLI and the demo."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from netprobe.lab import addressing as addr
from netprobe.lab.spec import Impairment

STATE_DIR = Path(os.environ.get("NETPROBE_LAB_STATE_DIR", "/run/netprobe-lab"))
STATE_FILE = "state.json"


class RouteInfo(BaseModel):
    """One emulated route. `ipv4`/`ipv6` are its target; every address of its block answers."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    index: int
    datacenter: str
    line: str
    namespace: str
    hostname: str
    ipv4: str
    ipv6: str
    prefix_v4: str
    prefix_v6: str
    tcp_ports: list[int]
    rtt_ms: float
    forward: Impairment
    reverse: Impairment
    hops: list[str]
    hops6: list[str]
    hop_loss_pct: list[float]
    # None: the way back crosses len(hops) routers that never answer (a spec without return_hops)
    return_hops: list[str] | None = None
    return_hops6: list[str] | None = None
    return_hop_loss_pct: list[float] = Field(default_factory=list)

    def topology(self) -> tuple[object, ...]:
        """What neither the relay (it owns the TUNs and listeners built from these) nor `lab set` can
        change while the lab runs."""
        return (self.index, self.id, self.namespace, tuple(self.tcp_ports))

    def ipv4_hosts(self, n: int) -> list[str]:
        """The first n addresses of the block (198.19.4k.1 …), e.g. 1,000 benchmark targets."""
        return [addr.host_v4(self.index, i) for i in range(1, n + 1)]

    def ipv6_hosts(self, n: int) -> list[str]:
        return [addr.host_v6(self.index, i) for i in range(1, n + 1)]


class LabState(BaseModel):
    model_config = ConfigDict(extra="forbid")

    spec_path: str
    agent_ns: str
    isp_ns: str
    namespaces: list[str]
    relay_pid: int
    relay_start_ticks: int
    generation: int
    profile: str = "base"             # base or peak figures of the spec (lab up/set --profile)
    agent_ipv4: str
    agent_ipv6: str
    isp_ipv4: str
    isp_ipv6: str
    unrouted_ipv4: str
    unrouted_ipv6: str
    routes: dict[str, RouteInfo]

    def relay_alive(self) -> bool:
        return process_start_ticks(self.relay_pid) == self.relay_start_ticks


def process_start_ticks(pid: int) -> int | None:
    """Start time of `pid` (clock ticks since boot) so a recycled pid is never taken for the relay."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] == "Z":
        return None
    return int(fields[19])


def read_state(state_dir: Path = STATE_DIR) -> LabState | None:
    try:
        text = (state_dir / STATE_FILE).read_text()
    except FileNotFoundError:
        return None
    return LabState.model_validate_json(text)


def write_state(state: LabState, state_dir: Path = STATE_DIR) -> None:
    tmp = state_dir / (STATE_FILE + ".tmp")
    tmp.write_text(state.model_dump_json(indent=1))
    tmp.replace(state_dir / STATE_FILE)
