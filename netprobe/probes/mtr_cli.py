"""`netprobe probe mtr`: trace the path hop by hop, with mtr's table redrawn after every cycle."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.live import Live
from rich.markup import escape
from rich.table import Table

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
from netprobe.probes.mtr import MtrResult, MtrSettings, trace
from netprobe.probes.render import console, ms, pct

if TYPE_CHECKING:
    from netprobe.net.geoip import GeoIP

_MTR_FIGURES = ("Last", "Avg", "Best", "Wrst", "StDev", "Javg")


def mtr_table(r: MtrResult, title: str | None = None) -> Table:
    """mtr's own columns; rate-limited hops dimmed (their loss is the router's, not the path's)."""
    if title is None:
        title = f"mtr {r.mode}{f' port {r.port}' if r.port else ''} to {escape(r.host)} ({r.address or '—'})"
    t = Table(title=title, title_justify="left", caption=_route_caption(r), caption_justify="left")
    for name in ("hop", "host", "ASN", "Loss%", "Snt", "Last", "Avg", "Best", "Wrst", "StDev", "Javg"):
        t.add_column(name, justify="left" if name in ("host", "ASN") else "right")
    for hop in r.hops:
        d = hop.to_dict()
        host = escape(" ".join(hop.addresses) or "???")
        if hop.icmp_errors:     # answered with an ICMP error (!H host unreachable…), as traceroute marks it
            host += "".join(f" !{code}" + (f"×{n}" if n > 1 else "") for code, n in hop.icmp_errors.items())
        asn = " ".join(x for x in (d["ASN"], escape(hop.org or ""), hop.country or "") if x)
        loss = pct(hop.loss_pct) + (" rl" if hop.rate_limited else "")
        cells = [str(hop.count), host, asn, loss, str(hop.sent),
                 *(ms(d[k]) if hop.answered else "—" for k in _MTR_FIGURES)]
        t.add_row(*cells, style="dim" if hop.rate_limited or not hop.answered else None)
    return t


def _route_caption(r: MtrResult) -> str:
    route = r.route
    if route is None:
        return ""
    text = f"line [bold]{route.label}[/]  path loss {pct(r.loss_pct)}%  hash {route.hash}"
    if route.mismatch:
        text += f"  [red]declared {escape(str(route.declared_line))}[/]"
    if any(h.rate_limited for h in r.hops):
        text += "  [dim](rl: loss at that hop only — ICMP rate limiting, not path loss)[/]"
    return text


AsnDbOpt = Annotated[str | None, typer.Option("--asn-db", metavar="FILE.mmdb", help="GeoLite2-ASN database.")]
CityDbOpt = Annotated[str | None, typer.Option("--city-db", metavar="FILE.mmdb",
                                               help="GeoLite2-City or -Country database.")]


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


def open_geoip(asn_db: str | None, city_db: str | None) -> GeoIP | None:
    """--asn-db / --city-db (mtr, rmtr): the databases, their warnings on stderr."""
    from netprobe.net.geoip import GeoIP  # maxminddb only when a database is given

    geoip = GeoIP(Path(asn_db) if asn_db else None, Path(city_db) if city_db else None) \
        if asn_db or city_db else None
    for warning in geoip.warnings if geoip is not None else []:
        sys.stderr.write(f"warning: {warning}\n")
    return geoip


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
