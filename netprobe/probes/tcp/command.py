"""`netprobe probe tcp`: time TCP connects, and the tcp table."""

from __future__ import annotations

import asyncio
import resource
from collections.abc import Sequence

import click

from netprobe.net.resolve import Resolver
from netprobe.net.socket_cap import SocketCap
from netprobe.net.targets_file import check_host_port
from netprobe.probes.base import ProbeCli, ProbeContext, ProbeTarget
from netprobe.probes.cli_common import (
    address_family,
    build_settings,
    check_family,
    collect,
    count_opt,
    emit,
    file_opt,
    interval_opt,
    json_opt,
    round_defaults,
    run_targets,
    timeout_opt,
    v4_opt,
    v6_opt,
)
from netprobe.probes.render import STAT_COLUMNS, add_status_row, ms, new_table, pct, stat_cells
from netprobe.probes.results import ProbeResult
from netprobe.probes.tcp.runtime import TcpResult, TcpSettings, run
from netprobe.textout import TextTable

# descriptors kept free of TCP connects (stdio, the event loop, the resolver's threads)
_FD_RESERVE = 128


def table(results: Sequence[ProbeResult]) -> TextTable:
    t = new_table("tcp connect (ms)", ["host", "address", "port", "dns", "sent", "ok", "fail%",
                                    *STAT_COLUMNS, "jitter", "failures", "status"])
    for r in [r for r in results if isinstance(r, TcpResult)]:
        failures = ", ".join(f"{kind} {n}" for kind, n in sorted(r.failures.items())) or "—"
        add_status_row(t, r, r.host, r.address or "—", str(r.port), ms(r.dns_ms), str(r.sent),
                       str(r.received), pct(r.loss_pct), *stat_cells(r.connect_ms), ms(r.jitter_ms), failures)
    return t


def tcp_slots() -> SocketCap:
    """Connects open at once, at most what the descriptor limit leaves (raised to the hard limit):
    a connect over it waits for a socket to close rather than fail with EMFILE."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        want = 1 << 20 if hard == resource.RLIM_INFINITY else hard
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
        except (ValueError, OSError):
            pass
    return SocketCap(max(16, soft - _FD_RESERVE))


@click.argument("targets_", nargs=-1, metavar="[HOST:PORT]...")
@file_opt
@count_opt
@interval_opt
@timeout_opt
@v4_opt
@v6_opt
@json_opt
def command(targets_: tuple[str, ...], file: str | None, count: int | None, interval: str | None,
            timeout: str | None, ipv4: bool, ipv6: bool, as_json: bool) -> None:
    """Time TCP connects (SYN → established) to HOST:PORTs; DNS time reported separately.

    HOST:PORT: [V6ADDR]:PORT for IPv6 literals."""
    family = address_family(ipv4, ipv6)

    def parse(text: str) -> tuple[str, int]:
        host, port = check_host_port(text)
        return check_family(host, family), port

    pairs = collect(targets_, file, parse)
    settings = build_settings(TcpSettings, {"count": count, "interval": interval, "timeout": timeout})
    targets = [ProbeTarget(id=f"{h}:{p}", host=h, port=p, family=family) for h, p in pairs]

    async def go() -> list[ProbeResult]:
        ctx = ProbeContext(resolver=Resolver(), tcp_slots=tcp_slots())
        return await run_targets(run, targets, settings, spread=settings.interval, ctx=ctx)

    results = asyncio.run(go())
    emit(results, as_json, len(targets) > 1 or file is not None, table)


CLI = ProbeCli(command=command, epilog=round_defaults(TcpSettings, "connects"))
