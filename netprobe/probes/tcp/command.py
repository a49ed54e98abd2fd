"""`netprobe probe tcp`: time TCP connects, and the tcp table."""

from __future__ import annotations

import asyncio
import resource
from collections.abc import Sequence
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from netprobe.net.resolve import Resolver
from netprobe.net.socket_cap import SocketCap
from netprobe.net.targets_file import check_host_port
from netprobe.probes.base import ProbeCli, ProbeContext, ProbeTarget
from netprobe.probes.cli_common import (
    FLAGS,
    CountOpt,
    FileOpt,
    IntervalOpt,
    JsonOpt,
    TimeoutOpt,
    V4Opt,
    V6Opt,
    address_family,
    build_settings,
    check_family,
    collect,
    emit,
    round_defaults,
    run_targets,
)
from netprobe.probes.render import STAT_COLUMNS, ms, new_table, pct, stat_cells, status_cell
from netprobe.probes.results import ProbeResult
from netprobe.probes.tcp.runtime import TcpResult, TcpSettings, run

# descriptors kept free of TCP connects (stdio, the event loop, the resolver's threads)
_FD_RESERVE = 128


def table(results: Sequence[ProbeResult]) -> Table:
    t = new_table("tcp connect (ms)", ["host", "address", "port", "dns", "sent", "ok", "fail%",
                                    *STAT_COLUMNS, "jitter", "failures", "status"])
    for r in [r for r in results if isinstance(r, TcpResult)]:
        failures = ", ".join(f"{kind} {n}" for kind, n in sorted(r.failures.items())) or "—"
        t.add_row(escape(r.host), r.address or "—", str(r.port), ms(r.dns_ms), str(r.sent), str(r.received),
                  pct(r.loss_pct), *stat_cells(r.connect_ms), ms(r.jitter_ms), failures, status_cell(r))
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


def command(
    targets_: Annotated[list[str] | None, typer.Argument(metavar="HOST:PORT", show_default=False,
                                                         help="[V6ADDR]:PORT for IPv6 literals.")] = None,
    file: FileOpt = None, count: CountOpt = None, interval: IntervalOpt = None,
    timeout: TimeoutOpt = None, ipv4: V4Opt = False, ipv6: V6Opt = False, as_json: JsonOpt = False,
) -> None:
    """Time TCP connects (SYN → established) to HOST:PORTs; DNS time reported separately."""
    family = address_family(ipv4, ipv6)

    def parse(text: str) -> tuple[str, int]:
        host, port = check_host_port(text)
        check_family(host, family)
        return host, port

    pairs = collect(targets_ or [], file, parse)
    settings = build_settings(TcpSettings, {"count": count, "interval": interval, "timeout": timeout},
                              FLAGS)
    targets = [ProbeTarget(id=f"{h}:{p}", host=h, port=p, family=family) for h, p in pairs]

    async def go() -> list[ProbeResult]:
        ctx = ProbeContext(resolver=Resolver(), tcp_slots=tcp_slots())
        return await run_targets(run, targets, settings, spread=settings.interval, ctx=ctx)

    results = asyncio.run(go())
    emit(results, as_json, len(targets) > 1 or file is not None, table)


CLI = ProbeCli(command=command, epilog=round_defaults(TcpSettings, "connects"), table=table)
