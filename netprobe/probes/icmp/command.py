"""`netprobe probe icmp`: ping hosts concurrently, and the icmp table."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from netprobe.net.pacing import stretched_round
from netprobe.net.resolve import Resolver, parse_literal
from netprobe.net.targets_file import check_host
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
from netprobe.probes.icmp.runtime import IcmpResult, IcmpSettings, run
from netprobe.probes.render import STAT_COLUMNS, ms, new_table, pct, stat_cells, status_cell
from netprobe.probes.results import ProbeResult


def table(results: Sequence[ProbeResult]) -> Table:
    t = new_table("icmp (ms)", ["host", "address", "sent", "recv", "loss%", *STAT_COLUMNS, "jitter",
                             "status"])
    for r in [r for r in results if isinstance(r, IcmpResult)]:
        t.add_row(escape(r.host), r.address or "—", str(r.sent), str(r.received), pct(r.loss_pct),
                  *stat_cells(r.rtt_ms), ms(r.jitter_ms), status_cell(r))
    return t


def warn_rate(n: int, settings: IcmpSettings, flag: str) -> None:
    """Say how long a round takes when the cap cannot keep every target at --interval."""
    if n <= settings.max_rate * settings.interval:
        return
    spacing, took = stretched_round(n, settings.count, settings.interval, settings.timeout, settings.max_rate)
    _, planned = stretched_round(n, settings.count, settings.interval, settings.timeout, float("inf"))
    sys.stderr.write(
        f"warning: {n:,} targets every {settings.interval:g}s need {n / settings.interval:,.0f} requests/s "
        f"but {flag} {settings.max_rate:g} caps them: each target gets a request every {spacing:.3g}s and a "
        f"round takes about {took:.1f}s instead of {planned:.1f}s "
        f"(raise {flag} to {n / settings.interval:.0f} to keep the interval)\n")


def command(
    hosts: Annotated[list[str] | None, typer.Argument(metavar="HOST", show_default=False)] = None,
    file: FileOpt = None, count: CountOpt = None, interval: IntervalOpt = None,
    timeout: TimeoutOpt = None,
    size: Annotated[int | None, typer.Option("--size", "-s", help="ICMP payload bytes.")] = None,
    rate: Annotated[float | None, typer.Option(
        "--rate", metavar="PPS", help="Cap on echo requests per second, all targets together "
                                      "(default 2000); requests over it wait.")] = None,
    ipv4: V4Opt = False, ipv6: V6Opt = False, as_json: JsonOpt = False,
) -> None:
    """Ping HOSTs (names or addresses) concurrently: loss, RTT percentiles, jitter. Target i of N
    starts at i·interval/N, as fping -p/-i do."""
    family = address_family(ipv4, ipv6)

    def parse(text: str) -> str:
        host = check_host(text)
        check_family(host, family)
        return host

    names = collect(hosts or [], file, parse)
    settings = build_settings(IcmpSettings, {"count": count, "interval": interval, "timeout": timeout,
                                             "size": size, "max_rate": rate}, FLAGS)
    warn_rate(len(names), settings, "--rate")
    targets = [ProbeTarget(id=h, host=h, family=family) for h in names]

    async def go() -> list[ProbeResult]:
        ctx = ProbeContext(resolver=Resolver(), icmp_max_rate=settings.max_rate)
        # names first, all at once: a slow lookup must not push its target out of its slot (tcp
        # does not: its rounds report the DNS time they paid)
        names = {(t.host, t.family) for t in targets if parse_literal(t.host) is None}
        await asyncio.gather(*(ctx.resolver.resolve(host, fam) for host, fam in names))
        return await run_targets(run, targets, settings, spread=settings.interval, ctx=ctx)

    results = asyncio.run(go())
    emit(results, as_json, len(targets) > 1 or file is not None, table)


CLI = ProbeCli(command=command, epilog=round_defaults(IcmpSettings, "echo requests"), table=table)
