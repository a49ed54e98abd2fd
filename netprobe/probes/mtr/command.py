"""`netprobe probe mtr`: trace the path hop by hop, with mtr's table redrawn after every cycle."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Annotated

import typer
from rich.live import Live

from netprobe.errors import UsageError
from netprobe.net.resolve import Resolver
from netprobe.net.targets_file import check_host
from netprobe.probes.base import ProbeCli, ProbeContext, ProbeTarget
from netprobe.probes.cli_common import (
    IntervalOpt,
    JsonOpt,
    V4Opt,
    V6Opt,
    address_family,
    build_settings,
    check_family,
)
from netprobe.probes.mtr.hop_table import AsnDbOpt, CityDbOpt, mtr_table, open_geoip
from netprobe.probes.mtr.runtime import MtrResult, MtrSettings, trace
from netprobe.probes.render import console


def command(
    host: Annotated[str, typer.Argument(metavar="HOST", show_default=False)],
    cycles: Annotated[int | None, typer.Option("--cycles", "-c",
                                               help="Rounds of probes (default 10).")] = None,
    interval: IntervalOpt = None,
    timeout: Annotated[str | None, typer.Option("--timeout", "-W", metavar="DURATION",
                                                help="Wait for late replies after the last cycle.")] = None,
    mode: Annotated[str | None, typer.Option("--mode", metavar="icmp|udp|tcp",
                                             help="Probe protocol (default icmp).")] = None,
    port: Annotated[int | None, typer.Option("--port", "-P", help="udp: 33434, tcp: 443 by default.")] = None,
    max_hops: Annotated[int | None, typer.Option("--max-hops", "-m",
                                                 help="Highest TTL (default 30).")] = None,
    asn_db: AsnDbOpt = None, city_db: CityDbOpt = None,
    ipv4: V4Opt = False, ipv6: V6Opt = False, as_json: JsonOpt = False,
) -> None:
    """Trace the path to HOST hop by hop, like mtr: loss and RTT per hop, the carrier line it runs on."""
    family = address_family(ipv4, ipv6)
    try:
        name = check_host(host)
        check_family(name, family)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    settings = build_settings(MtrSettings, {"cycles": cycles, "interval": interval, "timeout": timeout,
                                            "mode": mode, "port": port, "max_hops": max_hops,
                                            "every": 10**7}, _MTR_FLAGS)
    result = asyncio.run(_run_mtr(ProbeTarget(id=name, host=name, family=family), settings, asn_db, city_db,
                                  live=not as_json))
    if as_json:
        sys.stdout.write(json.dumps(result.to_dict()) + "\n")
        sys.stdout.flush()
    raise typer.Exit(0 if result.status == "ok" else 1)


_MTR_FLAGS = {"cycles": "--cycles", "interval": "--interval", "timeout": "--timeout", "mode": "--mode",
              "port": "--port", "max_hops": "--max-hops"}


async def _run_mtr(target: ProbeTarget, settings: MtrSettings, asn_db: str | None, city_db: str | None,
                   live: bool) -> MtrResult:
    """One trace; for people a table redrawn after every cycle, as mtr does."""
    ctx = ProbeContext(resolver=Resolver(), geoip=open_geoip(asn_db, city_db))
    try:
        if not live:
            return await trace(target, settings, ctx)
        out = console()
        with Live(console=out, auto_refresh=False) as view:
            result = await trace(target, settings, ctx,
                                 on_update=lambda r: view.update(mtr_table(r), refresh=True))
            view.update(mtr_table(result), refresh=True)
        if result.status != "ok" and result.error:
            out.print(f"[red]{target.host}:[/] {result.error}")
        return result
    finally:
        await ctx.close()


CLI = ProbeCli(command=command)
