"""The lab map people read after `lab up` / `lab status`."""

from __future__ import annotations

from netprobe.lab.spec import Impairment
from netprobe.lab.state import LabState, RouteInfo
from netprobe.textout import TextTable


def _direction(imp: Impairment) -> str:
    text = f"{imp.delay_ms:g}"
    if imp.jitter_ms:
        text += f" ±{imp.jitter_ms:g}"
    if imp.loss_pct:
        text += f" / {imp.loss_pct:g}%"
    if imp.duplicate_pct:
        text += f" dup {imp.duplicate_pct:g}%"
    return text


def _hops(r: RouteInfo) -> tuple[str, str | None]:
    """The way out, and the way back (None when it mirrors the forward count, silently)."""
    back = None if r.return_hops is None else "← " + (" ".join(r.return_hops) or "-")
    return " ".join(r.hops) or "-", back


def lab_table(state: LabState) -> TextTable:
    first = next(iter(state.routes.values()))
    table = TextTable(title=f"netprobe lab — agent namespace {state.agent_ns} "
                            f"({state.agent_ipv4}, {state.agent_ipv6})",
                      caption=f"every address of a route's block answers (e.g. {first.prefix_v4}); "
                              f"unrouted: {state.unrouted_ipv4} / {state.unrouted_ipv6}; "
                              f"run commands with `netprobe lab exec -- CMD`")
    for column in ("route", "datacenter", "line", "hostname", "IPv4", "IPv6"):
        table.add_column(column)
    table.add_column("RTT ms", justify="right")
    table.add_column("→ ms ±jitter / loss", justify="right")
    table.add_column("← ms ±jitter / loss", justify="right")
    table.add_column("TCP")
    table.add_column("hops")
    for r in sorted(state.routes.values(), key=lambda r: r.index):
        hops, back = _hops(r)
        ports = ",".join(str(p) for p in r.tcp_ports)
        table.add_row(r.id, r.datacenter, r.line, r.hostname, r.ipv4, r.ipv6, f"{r.rtt_ms:g}",
                      _direction(r.forward), _direction(r.reverse), ports, hops)
        if back is not None:  # a cell is one line: the way back goes under it, on a row of its own
            table.add_row(*[""] * 10, back)
    return table
