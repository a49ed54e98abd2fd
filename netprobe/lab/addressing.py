"""Where everything lives in 198.18.0.0/15 and 2001:2::/48; one place so nothing disagrees."""

from __future__ import annotations

import ipaddress

AGENT_NS = "np-agent"
ISP_NS = "np-isp"
DC_NS_PREFIX = "np-dc-"

AGENT_IF, ISP_IF = "isp0", "agent0"  # the veth ends: named for what they face
AGENT_MAC, ISP_MAC = "02:00:c6:12:00:01", "02:00:c6:12:00:02"
AGENT_V4, ISP_V4, LINK_V4_PLEN = "198.18.0.1", "198.18.0.2", 30
AGENT_V6, ISP_V6, LINK_V6_PLEN = "2001:2:0:ffff::1", "2001:2:0:ffff::2", 64

LAB_V4 = "198.18.0.0/15"
LAB_V6 = "2001:2::/48"
UNROUTED_V4 = "198.19.255.1"  # inside the lab range, routed nowhere: the isp answers unreachable
UNROUTED_V6 = "2001:2:0:fffe::1"

HOSTNAME_SUFFIX = ".lab"
TABLE_BASE = 100  # policy table of route k
RULE_PREF_BASE = 1000


def dc_namespace(datacenter: str) -> str:
    return DC_NS_PREFIX + datacenter


def prefix_v4(k: int) -> ipaddress.IPv4Network:
    return ipaddress.IPv4Network(f"198.19.{4 * k}.0/22")


def prefix_v6(k: int) -> ipaddress.IPv6Network:
    return ipaddress.IPv6Network(f"2001:2:0:{k + 1:x}::/64")


def host_v4(k: int, i: int = 1) -> str:
    """Address i (1-based) of route k's block; every address of the block answers."""
    net = prefix_v4(k)
    if not 1 <= i < net.num_addresses - 1:
        raise ValueError(f"host index {i} outside 1..{net.num_addresses - 2}")
    return str(net.network_address + i)


def host_v6(k: int, i: int = 1) -> str:
    if i < 1:
        raise ValueError(f"host index {i} must be ≥ 1")
    return str(prefix_v6(k).network_address + i)


def default_hop_v6(k: int, j: int) -> str:
    """IPv6 source of route k's emulated hop j (0-based) when the spec gives no hops6."""
    return f"2001:2:0:ff{k:02x}::{j + 1:x}"


def default_return_hop_v6(k: int, j: int) -> str:
    """IPv6 source of route k's emulated return hop j when the spec gives return_hops but no return_hops6."""
    return f"2001:2:0:fe{k:02x}::{j + 1:x}"


def tun_names(k: int) -> tuple[str, str]:
    """(isp side, datacenter side) TUN device names of route k."""
    return f"npa{k}", f"npb{k}"
