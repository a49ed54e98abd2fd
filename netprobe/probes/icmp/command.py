"""`netprobe probe icmp`: ping hosts concurrently, and the icmp table."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence

import click

from netprobe.net.pacing import stretched_round
from netprobe.net.resolve import Resolver, parse_literal
from netprobe.net.targets_file import check_host
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
from netprobe.probes.icmp.runtime import IcmpResult, IcmpSettings, run
from netprobe.probes.render import STAT_COLUMNS, add_status_row, ms, new_table, pct, stat_cells
from netprobe.probes.results import ProbeResult
from netprobe.textout import TextTable


def table(results: Sequence[ProbeResult]) -> TextTable:
    t = new_table("icmp (ms)", ["host", "address", "sent", "recv", "loss%", *STAT_COLUMNS, "jitter",
                             "status"])
    for r in [r for r in results if isinstance(r, IcmpResult)]:
        add_status_row(t, r, r.host, r.address or "—", str(r.sent), str(r.received), pct(r.loss_pct),
                       *stat_cells(r.rtt_ms), ms(r.jitter_ms))
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


@click.argument("hosts", nargs=-1, metavar="[HOST]...")
@file_opt
@count_opt
@interval_opt
@timeout_opt
@click.option("--size", "-s", "size", type=int, help="ICMP payload bytes.")
@click.option("--rate", "rate", type=float, metavar="PPS",
              help="Cap on echo requests per second, all targets together (default 2000); requests over it "
                   "wait.")
@v4_opt
@v6_opt
@json_opt
def command(hosts: tuple[str, ...], file: str | None, count: int | None, interval: str | None,
            timeout: str | None, size: int | None, rate: float | None, ipv4: bool, ipv6: bool,
            as_json: bool) -> None:
    """Ping HOSTs (names or addresses) concurrently: loss, RTT percentiles, jitter. Target i of N
    starts at i·interval/N, as fping -p/-i do."""
    family = address_family(ipv4, ipv6)

    def parse(text: str) -> str:
        return check_family(check_host(text), family)

    names = collect(hosts, file, parse)
    settings = build_settings(IcmpSettings, {"count": count, "interval": interval, "timeout": timeout,
                                             "size": size, "max_rate": rate})
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


CLI = ProbeCli(command=command, epilog=round_defaults(IcmpSettings, "echo requests"))
