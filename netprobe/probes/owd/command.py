"""`netprobe probe owd HOST:PORT`: both directions of the way to a reflector, and the owd table."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import click

from netprobe.net.resolve import Resolver
from netprobe.net.targets_file import check_host_port
from netprobe.probes import reflector
from netprobe.probes.base import ProbeCli, ProbeContext, ProbeTarget, ReflectorAuth
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
    token_file_opt,
    v4_opt,
    v6_opt,
)
from netprobe.probes.owd.figures import DelayVar
from netprobe.probes.owd.runtime import OwdResult, OwdSettings, run
from netprobe.probes.render import STAT_COLUMNS, add_status_row, ms, new_table, pct, stat_cells
from netprobe.probes.results import ProbeResult
from netprobe.textout import TextTable

clock_sync_opt = click.option(
    "--clock-sync", "clock_sync", is_flag=True,
    help="Both clocks are NTP/PTP-synchronised: also print absolute one-way delays.")


def table(results: Sequence[ProbeResult]) -> TextTable:
    t = new_table("owd (ms; fwd = to the reflector, ret = back)",
                  ["host", "address", "port", "sent", "recv", "loss%", "fwd%", "ret%", *STAT_COLUMNS,
                   "fwd var p95", "ret var p95", "fwd", "ret", "reord f/r", "dup f/r", "status"])
    for r in [r for r in results if isinstance(r, OwdResult)]:
        add_status_row(t, r, r.host, r.address or "—", str(r.port), str(r.sent), str(r.received),
                       pct(r.loss_pct), pct(r.fwd_loss_pct), pct(r.ret_loss_pct), *stat_cells(r.rtt_ms),
                       _var(r.fwd_delay_var_ms), _var(r.ret_delay_var_ms), ms(r.fwd_ms), ms(r.ret_ms),
                       f"{r.fwd_reordered}/{r.ret_reordered}", f"{r.fwd_duplicates}/{r.ret_duplicates}")
    return t


def _var(v: DelayVar | None) -> str:
    return ms(v.p95 if v is not None else None)


@click.argument("targets_", nargs=-1, metavar="[HOST:PORT]...")
@file_opt
@count_opt
@interval_opt
@timeout_opt
@token_file_opt
@clock_sync_opt
@v4_opt
@v6_opt
@json_opt
def command(targets_: tuple[str, ...], file: str | None, count: int | None, interval: str | None,
            timeout: str | None, token_file: str, clock_sync: bool, ipv4: bool, ipv6: bool,
            as_json: bool) -> None:
    """One-way figures to a reflector: loss, delay variation, reordering and duplicates per direction,
    RTT without the reflector's own time; absolute one-way delays only with --clock-sync.

    HOST:PORT: the reflector's UDP address (`netprobe target --udp`); [V6ADDR]:PORT for IPv6."""
    family = address_family(ipv4, ipv6)

    def parse(text: str) -> tuple[str, int]:
        host, port = check_host_port(text)
        return check_family(host.strip("[]"), family), port

    pairs = collect(targets_, file, parse)
    settings = build_settings(OwdSettings, {"count": count, "interval": interval, "timeout": timeout})
    token = reflector.cli_token(token_file)
    targets = [ProbeTarget(id=f"{h}:{p}", host=h, port=p, family=family) for h, p in pairs]

    async def go() -> list[ProbeResult]:
        ctx = ProbeContext(resolver=Resolver(), reflector=ReflectorAuth(token, clock_sync))
        return await run_targets(run, targets, settings, spread=settings.interval, ctx=ctx)

    emit(asyncio.run(go()), as_json, len(targets) > 1 or file is not None, table)


CLI = ProbeCli(command=command, epilog=round_defaults(OwdSettings, "requests"))
