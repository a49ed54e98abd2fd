"""The lab as a library: up, down, set_impairments, current. Sync on purpose: a CLI/test helper
that shells out to `ip`, never on the agent's async path."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from netprobe.errors import LabError, SetupError
from netprobe.lab import addressing as addr
from netprobe.lab import relay_config, relay_process, topology
from netprobe.lab.relay_config import RELAY_APPLIED, RelayConfig, read_config, write_config
from netprobe.lab.spec import LabSpec, load_spec
from netprobe.lab.state import STATE_DIR, STATE_FILE, LabState, RouteInfo, read_state, write_state

__all__ = ["LabState", "RouteInfo", "current", "down", "set_impairments", "up"]


# CAP_NET_ADMIN (links, routes, TUN) and CAP_SYS_ADMIN (namespaces, mounts): what root really means here
_LAB_CAPS = (12, 21)


def has_lab_privileges() -> bool:
    """Root with its capabilities: a uid 0 stripped of them (a container, setpriv) cannot build a lab."""
    if os.geteuid() != 0:
        return False
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            eff = int(line.split()[1], 16)
            return all(eff >> cap & 1 for cap in _LAB_CAPS)
    return True


def _require_root() -> None:
    if not has_lab_privileges():
        raise SetupError("netprobe lab needs root (it creates network namespaces and TUN devices); "
                         "run it with sudo")
    if not Path("/dev/net/tun").exists():
        raise SetupError("/dev/net/tun is missing: load the tun module (modprobe tun)")
    for tool in ("ip", "setsid"):
        if shutil.which(tool) is None:
            raise SetupError(f"`{tool}` not found: install {'iproute2' if tool == 'ip' else 'util-linux'}")


def route_infos(spec: LabSpec) -> list[RouteInfo]:
    out = []
    for k, r in enumerate(spec.routes):
        fwd, rev = r.forward_impairment(), r.reverse_impairment()
        out.append(RouteInfo(
            id=r.id, index=k, datacenter=r.datacenter, line=r.line,
            namespace=addr.dc_namespace(r.datacenter), hostname=r.id + addr.HOSTNAME_SUFFIX,
            ipv4=addr.host_v4(k), ipv6=addr.host_v6(k),
            prefix_v4=str(addr.prefix_v4(k)), prefix_v6=str(addr.prefix_v6(k)),
            tcp_ports=list(r.tcp_ports), rtt_ms=fwd.delay_ms + rev.delay_ms, forward=fwd, reverse=rev,
            hops=list(r.hops), hops6=list(r.hops6 or [addr.default_hop_v6(k, j) for j in range(len(r.hops))]),
            hop_loss_pct=r.hop_losses(), return_hops=None if r.return_hops is None else list(r.return_hops),
            return_hops6=None if r.return_hops is None else list(
                r.return_hops6 or [addr.default_return_hop_v6(k, j) for j in range(len(r.return_hops))]),
            return_hop_loss_pct=r.return_hop_losses(),
        ))
    return out


def current() -> LabState | None:
    """The running lab, or None. (A lab whose relay died is still returned: see relay_alive().)"""
    try:
        return read_state(STATE_DIR)
    except ValueError as exc:
        raise LabError(f"{STATE_DIR / STATE_FILE} is unreadable ({exc}); run `netprobe lab down`") from None


def up(spec_path: Path, replace: bool = False, profile: str = "base") -> LabState:
    """Build the lab described by spec_path (its base or peak figures); a lab already up is an error
    unless replace."""
    _require_root()
    spec = load_spec(spec_path).with_profile(profile)
    if current() is not None or topology.existing_lab_namespaces():
        if not replace:
            raise LabError("a lab is already up; run `netprobe lab down` first or pass --replace")
        down()
    routes = route_infos(spec)
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    for stale in (RELAY_APPLIED, relay_config.RELAY_LOG):
        (STATE_DIR / stale).unlink(missing_ok=True)
    pid = ticks = 0
    try:
        topology.build_base(routes)
        write_config(STATE_DIR, RelayConfig(generation=1, seed=spec.lab.seed, routes=routes))
        pid, ticks = relay_process.start(STATE_DIR)
        topology.wire_routes(routes)
        topology.write_name_files(routes)
        state = LabState(
            spec_path=str(spec_path.resolve()), agent_ns=addr.AGENT_NS, isp_ns=addr.ISP_NS,
            namespaces=topology.namespaces_for(routes), relay_pid=pid, relay_start_ticks=ticks,
            generation=1, profile=profile, agent_ipv4=addr.AGENT_V4, agent_ipv6=addr.AGENT_V6,
            isp_ipv4=addr.ISP_V4, isp_ipv6=addr.ISP_V6,
            unrouted_ipv4=addr.UNROUTED_V4, unrouted_ipv6=addr.UNROUTED_V6,
            routes={r.id: r for r in routes})
        write_state(state, STATE_DIR)
    except BaseException:
        if pid:
            relay_process.stop(pid, ticks)
        topology.teardown()
        raise
    return state


def down() -> None:
    """Stop the relay and remove namespaces and name files. Idempotent."""
    _require_root()
    state = current() if (STATE_DIR / STATE_FILE).exists() else None
    if state is not None:
        relay_process.stop(state.relay_pid, state.relay_start_ticks)
    problems = topology.teardown()
    for name in (STATE_FILE, relay_config.RELAY_CONFIG, RELAY_APPLIED):
        (STATE_DIR / name).unlink(missing_ok=True)
    if problems:
        raise LabError("lab down left something behind: " + "; ".join(problems))


def set_impairments(spec_path: Path, profile: str = "base") -> LabState:
    """Change delay/jitter/loss/hops/return hops of the running lab in place (no state is dropped)."""
    _require_root()
    spec = load_spec(spec_path).with_profile(profile)
    state = current()
    if state is None:
        raise LabError("no lab is up; run `netprobe lab up SPEC` first")
    routes = route_infos(spec)
    old = sorted(state.routes.values(), key=lambda r: r.index)
    if [r.topology() for r in routes] != [r.topology() for r in old]:
        raise LabError("lab set changes only impairments (delay, jitter, loss, hops); this spec changes "
                       "routes, datacenters or tcp_ports: run `netprobe lab up SPEC --replace`")
    generation = max(state.generation, read_config(STATE_DIR).generation) + 1
    write_config(STATE_DIR, RelayConfig(generation=generation, seed=spec.lab.seed, routes=routes))
    relay_process.reload(STATE_DIR, state.relay_pid, state.relay_start_ticks, generation)
    if [r.hostname for r in routes] != [r.hostname for r in old]:
        topology.write_name_files(routes)
    new_state = state.model_copy(update={
        "spec_path": str(spec_path.resolve()), "generation": generation, "profile": profile,
        "routes": {r.id: r for r in routes}})
    write_state(new_state, STATE_DIR)
    return new_state
