"""`netprobe probe rmtr TARGET_URL`: the way back — the target's reflector traces toward this host, and
the hops are classified here, shown as mtr's table."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from netprobe.config.base import is_http_url
from netprobe.errors import UsageError
from netprobe.net.resolve import Resolver
from netprobe.probes import reflector
from netprobe.probes.base import ProbeCli, ProbeContext, ProbeTarget, ReflectorAuth
from netprobe.probes.cli_common import (
    IntervalOpt,
    JsonOpt,
    TokenFileOpt,
    V4Opt,
    V6Opt,
    address_family,
    build_settings,
)
from netprobe.probes.mtr.hop_table import AsnDbOpt, CityDbOpt, mtr_table, open_geoip
from netprobe.probes.render import console
from netprobe.probes.rmtr.runtime import RmtrResult, RmtrSettings, run

_FLAGS = {"cycles": "--cycles", "interval": "--interval", "timeout": "--timeout", "mode": "--mode"}


def rmtr_table(r: RmtrResult) -> Table:
    title = (f"rmtr {r.mode}: from the reflector {escape(r.source or r.reflector)} back to "
             f"{r.address or '—'} (this host as it sees it)")
    return mtr_table(r, title)


def command(
    url: Annotated[str, typer.Argument(metavar="TARGET_URL", show_default=False,
                                       help="The target's `netprobe target` (reflector), e.g. "
                                            "http://hk1.example.net:8473")],
    cycles: Annotated[int | None, typer.Option("--cycles", "-c",
                                               help="Rounds of probes the reflector sends (default 10, "
                                                    "at most 30).")] = None,
    interval: IntervalOpt = None,
    timeout: Annotated[str | None, typer.Option("--timeout", "-W", metavar="DURATION",
                                                help="Connect, and the wait beyond the trace's own "
                                                     "length (default 10s).")] = None,
    mode: Annotated[str | None, typer.Option("--mode", metavar="icmp|udp|tcp",
                                             help="The reflector's probe protocol (default icmp).")] = None,
    token_file: TokenFileOpt = "",
    asn_db: AsnDbOpt = None, city_db: CityDbOpt = None,
    ipv4: V4Opt = False, ipv6: V6Opt = False, as_json: JsonOpt = False,
) -> None:
    """Trace the way back: the target's reflector traces toward this host (as the datacenter sees it,
    NAT included) and the hops are classified here — the line return traffic takes."""
    family = address_family(ipv4, ipv6)
    url = url.strip().rstrip("/")
    if not is_http_url(url):
        raise UsageError(f"TARGET_URL: {url!r} is not an http:// or https:// URL (the target's reflector, "
                         "e.g. http://hk1.example.net:8473)")
    settings = build_settings(RmtrSettings, {"cycles": cycles, "interval": interval, "timeout": timeout,
                                             "mode": mode, "every": 10**7}, _FLAGS)
    token = reflector.cli_token(token_file)
    host, _ = reflector.host_port(url)
    target = ProbeTarget(id=host or url, host=host or url, url=url, family=family,
                         options={reflector.KEY: url})
    result = asyncio.run(_run(target, settings, token, asn_db, city_db))
    if as_json:
        sys.stdout.write(json.dumps(result.to_dict()) + "\n")
        sys.stdout.flush()
    else:
        out = console()
        out.print(rmtr_table(result))
        if result.status != "ok" and result.error:
            out.print(f"[red]{escape(url)}:[/] {escape(result.error)}")
    raise typer.Exit(0 if result.status == "ok" else 1)


async def _run(target: ProbeTarget, settings: RmtrSettings, token: str, asn_db: str | None,
               city_db: str | None) -> RmtrResult:
    ctx = ProbeContext(resolver=Resolver(), geoip=open_geoip(asn_db, city_db), reflector=ReflectorAuth(token))
    try:
        return await run(target, settings, ctx)
    finally:
        await ctx.close()


CLI = ProbeCli(command=command)
