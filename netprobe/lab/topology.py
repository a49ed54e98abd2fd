"""Namespaces, veths, routes and rules of the lab: everything `ip` does, before and after the relay."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

from netprobe.errors import LabError
from netprobe.lab import addressing as addr
from netprobe.lab import netns
from netprobe.lab.state import RouteInfo

NETNS_ETC = Path("/etc/netns")

_COMMON_SYSCTLS = {
    # The relay's TUNs make paths asymmetric to the kernel's eye (hop sources, policy tables).
    "net.ipv4.conf.all.rp_filter": "0",
    "net.ipv4.conf.default.rp_filter": "0",
    # Addresses usable at once: no 1 s of tentative IPv6 address after lab up.
    "net.ipv6.conf.all.accept_dad": "0",
    "net.ipv6.conf.default.accept_dad": "0",
}
_ROUTER_SYSCTLS = {
    "net.ipv4.ip_forward": "1",
    "net.ipv6.conf.all.forwarding": "1",
    # A real router rate-limits its ICMP; the lab's only limit is the spec's hop_loss_pct.
    "net.ipv4.icmp_ratelimit": "0",
    "net.ipv6.icmp.ratelimit": "0",
}
_DC_SYSCTLS = {"net.ipv4.icmp_ratelimit": "0", "net.ipv6.icmp.ratelimit": "0"}


def namespaces_for(routes: list[RouteInfo]) -> list[str]:
    dcs = sorted({r.namespace for r in routes})
    return [addr.AGENT_NS, addr.ISP_NS, *dcs]


def existing_lab_namespaces() -> list[str]:
    return [n for n in netns.list_namespaces()
            if n in (addr.AGENT_NS, addr.ISP_NS) or n.startswith(addr.DC_NS_PREFIX)]


def build_base(routes: list[RouteInfo]) -> None:
    """Namespaces and the agent↔isp link: everything that exists before the relay's TUNs."""
    names = namespaces_for(routes)
    netns.ip_batch(None, [f"netns add {n}" for n in names] + [
        f"link add {addr.AGENT_IF} netns {addr.AGENT_NS} address {addr.AGENT_MAC} type veth "
        f"peer name {addr.ISP_IF} netns {addr.ISP_NS} address {addr.ISP_MAC}",
    ])
    for name in names:
        sysctls = dict(_COMMON_SYSCTLS)
        sysctls.update(_ROUTER_SYSCTLS if name == addr.ISP_NS else {})
        sysctls.update(_DC_SYSCTLS if name.startswith(addr.DC_NS_PREFIX) else {})
        netns.write_sysctls(name, sysctls)
        netns.ip_batch(name, ["link set lo up"])
    agent, isp = (addr.AGENT_V4, addr.AGENT_V6), (addr.ISP_V4, addr.ISP_V6)
    for ns, dev, mine, peer, peer_mac in ((addr.AGENT_NS, addr.AGENT_IF, agent, isp, addr.ISP_MAC),
                                          (addr.ISP_NS, addr.ISP_IF, isp, agent, addr.AGENT_MAC)):
        # Static neighbours: no ARP/ND round trip on the first probe of a run.
        netns.ip_batch(ns, [
            f"addr add {mine[0]}/{addr.LINK_V4_PLEN} dev {dev}",
            f"link set {dev} up",
            f"neigh replace {peer[0]} lladdr {peer_mac} dev {dev} nud permanent",
        ])
        netns.ip_batch(ns, [
            f"addr add {mine[1]}/{addr.LINK_V6_PLEN} dev {dev} nodad",
            f"neigh replace {peer[1]} lladdr {peer_mac} dev {dev} nud permanent",
        ], ipv6=True)
    netns.ip_batch(addr.AGENT_NS, [f"route add default via {addr.ISP_V4}"])
    netns.ip_batch(addr.AGENT_NS, [f"route add default via {addr.ISP_V6}"], ipv6=True)
    # The isp has no default route: anything in the lab range not owned by a route is unreachable.
    netns.ip_batch(addr.ISP_NS, [f"route add unreachable {addr.LAB_V4}"])
    netns.ip_batch(addr.ISP_NS, [f"route add unreachable {addr.LAB_V6}"], ipv6=True)


def wire_routes(routes: list[RouteInfo], txqueuelen: int = 10_000) -> None:
    """Routes and rules through the relay's TUNs (they exist once the relay reported ready)."""
    isp4: list[str] = []
    isp6: list[str] = []
    dc4: dict[str, list[str]] = {}
    dc6: dict[str, list[str]] = {}
    for r in routes:
        tun_isp, tun_dc = addr.tun_names(r.index)
        table, pref = addr.TABLE_BASE + r.index, addr.RULE_PREF_BASE + r.index
        isp4 += [f"link set {tun_isp} txqueuelen {txqueuelen} up", f"route add {r.prefix_v4} dev {tun_isp}"]
        isp6 += [f"route add {r.prefix_v6} dev {tun_isp}"]
        # AnyIP: the whole block is local, so every address answers ping and TCP.
        dc4.setdefault(r.namespace, []).extend([
            f"link set {tun_dc} txqueuelen {txqueuelen} up",
            f"route add local {r.prefix_v4} dev lo",
            f"rule add from {r.prefix_v4} lookup {table} pref {pref}",
            f"route add default dev {tun_dc} table {table}",
        ])
        # Replies leave by the TUN of the route they arrived on, even with two routes to one dc.
        # The target itself also as an address: ICMPv6 errors (UDP port unreachable for mtr -u)
        # are only sourced from configured addresses, not from AnyIP ones.
        dc6.setdefault(r.namespace, []).extend([
            f"route add local {r.prefix_v6} dev lo",
            f"addr add {r.ipv6}/128 dev lo nodad",
            f"rule add from {r.prefix_v6} lookup {table} pref {pref}",
            f"route add default dev {tun_dc} table {table}",
        ])
    # What a datacenter sends from no route's address (a trace back toward the agent, `ip netns exec
    # np-dc-… mtr 198.18.0.1`) leaves by its first route: a real host has one way out, a default route.
    for ns in dc4:
        first = next(r for r in routes if r.namespace == ns)
        tun_dc = addr.tun_names(first.index)[1]
        dc4[ns].append(f"route add {addr.LAB_V4} dev {tun_dc} src {first.ipv4}")
        dc6[ns].append(f"route add {addr.LAB_V6} dev {tun_dc} src {first.ipv6}")
    netns.ip_batch(addr.ISP_NS, isp4)
    netns.ip_batch(addr.ISP_NS, isp6, ipv6=True)
    for ns, cmds in dc4.items():
        netns.ip_batch(ns, cmds)
        netns.ip_batch(ns, dc6[ns], ipv6=True)


def write_name_files(routes: list[RouteInfo]) -> None:
    """`ip netns exec np-agent` bind-mounts these over /etc: <route>.lab resolves, DNS goes nowhere."""
    etc = NETNS_ETC / addr.AGENT_NS
    etc.mkdir(parents=True, exist_ok=True)
    lines = ["127.0.0.1 localhost", "::1 localhost ip6-localhost ip6-loopback"]
    for r in routes:
        lines += [f"{r.ipv4} {r.hostname}", f"{r.ipv6} {r.hostname}"]
    (etc / "hosts").write_text("\n".join(lines) + "\n")
    # Nothing listens on 127.0.0.1:53 inside the namespace: lookups of other names fail fast.
    (etc / "resolv.conf").write_text("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")


def teardown() -> list[str]:
    """Remove every lab namespace and name file; returns the problems it could not fix."""
    problems: list[str] = []
    for name in existing_lab_namespaces():
        try:
            netns.run(["ip", "netns", "del", name])
        except LabError as exc:
            problems.append(str(exc))
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(NETNS_ETC / addr.AGENT_NS)
    return problems
