"""The lab map people read after `lab up` / `lab status`."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from netprobe.lab.spec import Impairment
from netprobe.lab.state import LabState, RouteInfo


def _direction(imp: Impairment) -> str:
    text = f"{imp.delay_ms:g}"
    if imp.jitter_ms:
        text += f" ±{imp.jitter_ms:g}"
    if imp.loss_pct:
        text += f" / {imp.loss_pct:g}%"
    if imp.duplicate_pct:
        text += f" dup {imp.duplicate_pct:g}%"
    return text


def _hops(r: RouteInfo) -> str:
    text = " ".join(r.hops) or "-"
    if r.return_hops is not None:  # else the way back mirrors the forward count, silently
        text += "\n← " + (" ".join(r.return_hops) or "-")
    return text


def lab_table(state: LabState) -> Table:
    table = Table(title=f"netprobe lab — agent namespace {state.agent_ns} "
                        f"({state.agent_ipv4}, {state.agent_ipv6})", title_justify="left")
    for column in ("route", "datacenter", "line", "hostname", "IPv4", "IPv6"):
        table.add_column(column)
    table.add_column("RTT ms", justify="right")
    table.add_column("→ ms ±jitter / loss", justify="right")
    table.add_column("← ms ±jitter / loss", justify="right")
    table.add_column("TCP")
    table.add_column("hops")
    for r in sorted(state.routes.values(), key=lambda r: r.index):
        # Text, not str: rich would read route 9's 2001:2:0:a::1 as the emoji code ":a:".
        table.add_row(*map(Text, (r.id, r.datacenter, r.line, r.hostname, r.ipv4, r.ipv6, f"{r.rtt_ms:g}",
                                  _direction(r.forward), _direction(r.reverse),
                                  ",".join(str(p) for p in r.tcp_ports), _hops(r))))
    first = next(iter(state.routes.values()))
    table.caption = (f"every address of a route's block answers (e.g. {first.prefix_v4}); "
                     f"unrouted: {state.unrouted_ipv4} / {state.unrouted_ipv6}; "
                     f"run commands with `netprobe lab exec -- CMD`")
    return table
