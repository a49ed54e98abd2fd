"""`netprobe probe mtr`: trace the path hop by hop, with mtr's table redrawn after every cycle."""

from __future__ import annotations

import asyncio
import shutil
from types import TracebackType

import click

from netprobe.errors import UsageError
from netprobe.net.resolve import Resolver
from netprobe.net.targets_file import check_host
from netprobe.probes.base import ProbeCli, ProbeContext, ProbeTarget
from netprobe.probes.cli_common import (
    address_family,
    build_settings,
    check_family,
    emit,
    interval_opt,
    json_opt,
    v4_opt,
    v6_opt,
)
from netprobe.probes.mtr.hop_table import asn_db_opt, city_db_opt, mtr_table, open_geoip
from netprobe.probes.mtr.runtime import MtrResult, MtrSettings, trace
from netprobe.textout import Out, TextTable, style


@click.argument("host", metavar="HOST")
@click.option("--cycles", "-c", "cycles", type=int, help="Rounds of probes (default 10).")
@interval_opt
@click.option("--timeout", "-W", "timeout", metavar="DURATION",
              help="Wait for late replies after the last cycle.")
@click.option("--mode", "mode", metavar="icmp|udp|tcp", help="Probe protocol (default icmp).")
@click.option("--port", "-P", "port", type=int, help="udp: 33434, tcp: 443 by default.")
@click.option("--max-hops", "-m", "max_hops", type=int, help="Highest TTL (default 30).")
@asn_db_opt
@city_db_opt
@v4_opt
@v6_opt
@json_opt
def command(host: str, cycles: int | None, interval: str | None, timeout: str | None, mode: str | None,
            port: int | None, max_hops: int | None, asn_db: str | None, city_db: str | None, ipv4: bool,
            ipv6: bool, as_json: bool) -> None:
    """Trace the path to HOST hop by hop, like mtr: loss and RTT per hop, the carrier line it runs on."""
    family = address_family(ipv4, ipv6)
    try:
        name = check_family(check_host(host), family)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    settings = build_settings(MtrSettings, {"cycles": cycles, "interval": interval, "timeout": timeout,
                                            "mode": mode, "port": port, "max_hops": max_hops})
    result = asyncio.run(_run_mtr(ProbeTarget(id=name, host=name, family=family), settings, asn_db, city_db,
                                  live=not as_json))
    emit([result], as_json, False, None)     # its table was drawn live, after every cycle


async def _run_mtr(target: ProbeTarget, settings: MtrSettings, asn_db: str | None, city_db: str | None,
                   live: bool) -> MtrResult:
    """One trace; for people a table redrawn after every cycle, as mtr does."""
    ctx = ProbeContext(resolver=Resolver(), geoip=open_geoip(asn_db, city_db))
    try:
        if not live:
            return await trace(target, settings, ctx)
        out = Out()
        with _Live(out) as view:
            result = await trace(target, settings, ctx, on_update=lambda r: view.update(mtr_table(r)))
            view.update(mtr_table(result))
        if result.status != "ok" and result.error:
            out.print(style(f"{target.host}:", "red") + f" {result.error}")
        return result
    finally:
        await ctx.close()


class _Live:
    """A table redrawn in place on a terminal, as rich's Live drew it: while it changes, cut to the
    screen (no line wraps, rows past its height left off) so the cursor can go back over it; at the
    end drawn whole. Elsewhere (a pipe) only the last table is printed, once."""

    def __init__(self, out: Out) -> None:
        self.out = out
        self.last: TextTable | None = None
        self.height = 0     # lines the last frame drew

    def __enter__(self) -> _Live:
        return self

    def update(self, table: TextTable) -> None:
        self.last = table
        if not self.out.terminal:
            return
        columns, rows = shutil.get_terminal_size()
        lines = list(table.lines(columns))
        if len(lines) > rows - 1:
            lines = [*lines[:max(rows - 2, 0)], "...".center(columns)]
        # cursor hidden and line wrap off while a frame replaces the last one
        self._write(f"\x1b[?25l\x1b[?7l{self._erase()}" + "\n".join(lines) + "\x1b[?7h\n")
        self.height = len(lines)

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.out.terminal:
            self._write(self._erase() + "\x1b[?25h")
        if self.last is not None:
            self.out.table(self.last)

    def _erase(self) -> str:
        return f"\x1b[{self.height}F\x1b[J" if self.height else ""

    def _write(self, text: str) -> None:
        click.echo(text, file=self.out.file, nl=False, color=True)


CLI = ProbeCli(command=command)
