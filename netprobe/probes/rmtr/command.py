"""`netprobe probe rmtr TARGET_URL`: the way back — the target's reflector traces toward this host, and
the hops are classified here, shown as mtr's table."""

from __future__ import annotations

import asyncio

import click

from netprobe.config.base import is_http_url
from netprobe.errors import UsageError
from netprobe.net.resolve import Resolver
from netprobe.probes import reflector
from netprobe.probes.base import ProbeCli, ProbeContext, ProbeTarget, ReflectorAuth
from netprobe.probes.cli_common import (
    address_family,
    build_settings,
    emit,
    interval_opt,
    json_opt,
    token_file_opt,
    v4_opt,
    v6_opt,
)
from netprobe.probes.mtr.hop_table import asn_db_opt, city_db_opt, mtr_table, open_geoip
from netprobe.probes.rmtr.runtime import RmtrResult, RmtrSettings, run
from netprobe.textout import Out, style


@click.argument("url", metavar="TARGET_URL")
@click.option("--cycles", "-c", "cycles", type=int,
              help="Rounds of probes the reflector sends (default 10, at most 30).")
@interval_opt
@click.option("--timeout", "-W", "timeout", metavar="DURATION",
              help="Connect, and the wait beyond the trace's own length (default 10s).")
@click.option("--mode", "mode", metavar="icmp|udp|tcp", help="The reflector's probe protocol (default icmp).")
@token_file_opt
@asn_db_opt
@city_db_opt
@v4_opt
@v6_opt
@json_opt
def command(url: str, cycles: int | None, interval: str | None, timeout: str | None, mode: str | None,
            token_file: str, asn_db: str | None, city_db: str | None, ipv4: bool, ipv6: bool,
            as_json: bool) -> None:
    """Trace the way back: the target's reflector traces toward this host (as the datacenter sees it,
    NAT included) and the hops are classified here — the line return traffic takes.

    TARGET_URL: the target's `netprobe target` (reflector), e.g. http://hk1.example.net:8473"""
    family = address_family(ipv4, ipv6)
    url = url.strip().rstrip("/")
    if not is_http_url(url):
        raise UsageError(f"TARGET_URL: {url!r} is not an http:// or https:// URL (the target's reflector, "
                         "e.g. http://hk1.example.net:8473)")
    settings = build_settings(RmtrSettings, {"cycles": cycles, "interval": interval, "timeout": timeout,
                                             "mode": mode})
    token = reflector.cli_token(token_file)
    host, _ = reflector.host_port(url)
    target = ProbeTarget(id=host or url, host=host or url, url=url, family=family,
                         options={reflector.KEY: url})
    result = asyncio.run(_run(target, settings, token, asn_db, city_db))
    if not as_json:     # its failure is said of the URL it was given, not of the host (emit's way)
        title = (f"rmtr {result.mode}: from the reflector {result.source or result.reflector} back to "
                 f"{result.address or '—'} (this host as it sees it)")
        out = Out()
        out.table(mtr_table(result, title))
        if result.status != "ok" and result.error:
            out.print(style(f"{url}:", "red") + f" {result.error}")
    emit([result], as_json, False, None)


async def _run(target: ProbeTarget, settings: RmtrSettings, token: str, asn_db: str | None,
               city_db: str | None) -> RmtrResult:
    ctx = ProbeContext(resolver=Resolver(), geoip=open_geoip(asn_db, city_db), reflector=ReflectorAuth(token))
    try:
        return await run(target, settings, ctx)
    finally:
        await ctx.close()


CLI = ProbeCli(command=command)
