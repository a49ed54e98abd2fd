"""`netprobe probe …`: run one round of a probe against one or many targets now and print it.

All targets of one command run concurrently through one ProbeContext (one ICMP engine, one
resolver), paced like fping -p/-i: target i of N starts at i·interval/N, so the requests of a round
leave evenly over the interval, not as one burst; the ICMP engine's rate cap (--rate) holds on top.
Exit status: 0 every target ok, 1 some target failed (100 % loss, refused,
unresolvable — data), 2 bad input (raised as UsageError, printed by netprobe.cli.main).
"""

from __future__ import annotations

import asyncio
import json
import resource
import socket
import sys
from collections.abc import Callable, Sequence
from typing import Annotated, Any, TypeVar

import typer
from pydantic import ValidationError
from rich.table import Table

from netprobe.config.durations import parse_duration
from netprobe.errors import UsageError
from netprobe.net.pacing import launch_paced, stretched_round
from netprobe.net.resolve import Resolver, family_name, parse_literal
from netprobe.net.targets_file import MAX_TARGETS, check_host, check_host_port, read_targets
from netprobe.probes import REGISTRY
from netprobe.probes.base import ProbeContext, ProbeSettings, ProbeTarget, RoundSettings
from netprobe.probes.icmp import IcmpSettings
from netprobe.probes.render import icmp_table, print_table, tcp_table
from netprobe.probes.results import IcmpResult, MtrResult, ProbeResult, SseResult, TcpResult
from netprobe.probes.tcp import TcpSettings

app = typer.Typer(no_args_is_help=True, help="Run one probe now and print what it measured.")

S = TypeVar("S", bound=ProbeSettings)
T = TypeVar("T")

# descriptors kept free of TCP connects (stdio, the event loop, the resolver's threads)
_FD_RESERVE = 128

# --- shared plumbing (icmp, tcp and later probes) -------------------------------------------------


def build_settings(model: type[S], options: dict[str, Any], flags: dict[str, str]) -> S:
    """Validate CLI options through the probe's settings model, so errors read like config errors.

    `every` does not apply to a one-off run; it is set just large enough for the round to fit.
    """
    values = {k: v for k, v in options.items() if v is not None}
    if issubclass(model, RoundSettings):
        values.setdefault("every", _every_for(model, values))
    try:
        return model(**values)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            field = str(err["loc"][0]) if err["loc"] else ""
            msg = str(err["msg"]).removeprefix("Value error, ")
            problems.append(f"{flags.get(field, field)}: {msg}" if field else msg)
        raise UsageError("; ".join(problems)) from None


def _every_for(model: type[ProbeSettings], values: dict[str, Any]) -> float:
    def get(name: str) -> Any:
        return values.get(name, model.model_fields[name].default)

    try:
        count = int(get("count"))
        interval = parse_duration(get("interval"))
        timeout = parse_duration(get("timeout"))
    except (TypeError, ValueError):
        return 60.0  # the model reports the bad value itself
    return max(60.0, (count - 1) * interval + timeout + interval + 1.0)


def address_family(ipv4: bool, ipv6: bool) -> int:
    if ipv4 and ipv6:
        raise UsageError("-4 and -6 exclude each other")
    return socket.AF_INET if ipv4 else socket.AF_INET6 if ipv6 else 0


def check_family(host: str, family: int) -> None:
    """An address literal of the other family than -4/-6 asks for is a usage error, not data."""
    addr = parse_literal(host)
    if addr is None or not family:
        return
    got = socket.AF_INET if addr.version == 4 else socket.AF_INET6
    if got != family:
        flag = "-4" if family == socket.AF_INET else "-6"
        raise ValueError(f"{host} is {family_name(got)} but {flag} asks for {family_name(family)}")


def collect(args: Sequence[str], file: str | None, parse: Callable[[str], T]) -> list[T]:
    """Command-line entries then the entries of -f FILE, all validated before anything runs."""
    out: list[T] = []
    for arg in args:
        try:
            out.append(parse(arg))
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    if file is not None:
        out.extend(read_targets(file, parse))
    if not out:
        raise UsageError("no targets: give at least one on the command line or with -f FILE")
    if len(out) > MAX_TARGETS:
        raise UsageError(f"too many targets: {len(out):,} given, at most {MAX_TARGETS:,} per command "
                         "(split the file, or run them from an agent)")
    return out


async def run_targets(probe: str, targets: Sequence[ProbeTarget], settings: ProbeSettings,
                      spread: float = 0.0, ctx: ProbeContext | None = None) -> list[ProbeResult]:
    """One round of `probe` per target through one shared ProbeContext; target i of N starts at
    i·spread/N (fping's -p/-i schedule), every target's round then runs on its own."""
    spec = REGISTRY[probe]
    ctx = ctx or ProbeContext(resolver=Resolver())
    failed = asyncio.Event()

    async def one(target: ProbeTarget) -> ProbeResult:
        try:
            return await spec.run(target, settings, ctx)
        except BaseException:
            failed.set()  # a setup error (no raw-socket permission, …): stop launching the others
            raise

    tasks: list[asyncio.Task[ProbeResult]] = []
    try:
        tasks = await launch_paced(targets, spread if len(targets) > 1 else 0.0, one, stop=failed)
        return list(await asyncio.gather(*tasks))
    finally:  # a setup error in one stops the others cleanly
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await ctx.close()


def tcp_slots() -> asyncio.Semaphore:
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
    return asyncio.Semaphore(max(16, soft - _FD_RESERVE))


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


def emit(results: Sequence[ProbeResult], as_json: bool, as_list: bool,
         table: Callable[[Sequence[ProbeResult]], Table]) -> None:
    """Print results (one JSON object, or a table) and exit 0 if every target is ok, else 1."""
    if as_json:
        body: dict[str, Any] = (
            {"results": [r.to_dict() for r in results]} if as_list else results[0].to_dict())
        sys.stdout.write(json.dumps(body) + "\n")
        sys.stdout.flush()
    else:
        print_table(table(results), results)
    raise typer.Exit(0 if all(r.status == "ok" for r in results) else 1)


# --- commands ---------------------------------------------------------------------------------------

FileOpt = Annotated[str | None, typer.Option("--file", "-f", metavar="FILE",
                                             help="Read targets from FILE, one per line ('-' = stdin).")]
CountOpt = Annotated[int | None, typer.Option("--count", "-c", help="Requests per target.")]
IntervalOpt = Annotated[str | None, typer.Option("--interval", "-i", metavar="DURATION",
                                                 help="Time between requests: 500ms, 0.2, 1s.")]
TimeoutOpt = Annotated[str | None, typer.Option("--timeout", "-W", metavar="DURATION",
                                                help="Per-request timeout.")]
V4Opt = Annotated[bool, typer.Option("-4", help="IPv4 only.")]
V6Opt = Annotated[bool, typer.Option("-6", help="IPv6 only.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="One JSON object on stdout.")]

def _defaults(model: type[RoundSettings], what: str) -> str:
    d = model()
    return f"Defaults: --count {d.count} {what} {d.interval:g}s apart, --timeout {d.timeout:g}s."


_FLAGS = {"count": "--count", "interval": "--interval", "timeout": "--timeout", "size": "--size",
          "max_rate": "--rate"}


@app.command("icmp", epilog=_defaults(IcmpSettings, "echo requests"))
def icmp_command(
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
                                             "size": size, "max_rate": rate}, _FLAGS)
    warn_rate(len(names), settings, "--rate")
    targets = [ProbeTarget(id=h, host=h, family=family) for h in names]

    async def go() -> list[ProbeResult]:
        ctx = ProbeContext(resolver=Resolver(), icmp_max_rate=settings.max_rate)
        # names first, all at once: a slow lookup must not push its target out of its slot (tcp
        # does not: its rounds report the DNS time they paid)
        names = {(t.host, t.family) for t in targets if parse_literal(t.host) is None}
        await asyncio.gather(*(ctx.resolver.resolve(host, fam) for host, fam in names))
        return await run_targets("icmp", targets, settings, spread=settings.interval, ctx=ctx)

    results = asyncio.run(go())
    emit(results, as_json, len(targets) > 1 or file is not None,
         lambda rs: icmp_table([r for r in rs if isinstance(r, IcmpResult)]))


@app.command("tcp", epilog=_defaults(TcpSettings, "connects"))
def tcp_command(
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
                              _FLAGS)
    targets = [ProbeTarget(id=f"{h}:{p}", host=h, port=p, family=family) for h, p in pairs]

    async def go() -> list[ProbeResult]:
        ctx = ProbeContext(resolver=Resolver(), tcp_slots=tcp_slots())
        return await run_targets("tcp", targets, settings, spread=settings.interval, ctx=ctx)

    results = asyncio.run(go())
    emit(results, as_json, len(targets) > 1 or file is not None,
         lambda rs: tcp_table([r for r in rs if isinstance(r, TcpResult)]))


@app.command("mtr")
def mtr_command(
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
    asn_db: Annotated[str | None, typer.Option("--asn-db", metavar="FILE.mmdb",
                                               help="GeoLite2-ASN database.")] = None,
    city_db: Annotated[str | None, typer.Option("--city-db", metavar="FILE.mmdb",
                                                help="GeoLite2-City or -Country database.")] = None,
    ipv4: V4Opt = False, ipv6: V6Opt = False, as_json: JsonOpt = False,
) -> None:
    """Trace the path to HOST hop by hop, like mtr: loss and RTT per hop, the carrier line it runs on."""
    from netprobe.probes.mtr import MtrSettings

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


async def _run_mtr(target: ProbeTarget, settings: Any, asn_db: str | None, city_db: str | None,
                   live: bool) -> MtrResult:
    """One trace; for people a table redrawn after every cycle, as mtr does."""
    from pathlib import Path

    from rich.live import Live

    from netprobe.net.geoip import GeoIP
    from netprobe.probes.mtr import trace
    from netprobe.probes.render import console, mtr_table

    geoip = GeoIP(Path(asn_db) if asn_db else None, Path(city_db) if city_db else None) \
        if asn_db or city_db else None
    for warning in geoip.warnings if geoip is not None else []:
        sys.stderr.write(f"warning: {warning}\n")
    ctx = ProbeContext(resolver=Resolver(), geoip=geoip)
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


@app.command("sse")
def sse_command(
    url: Annotated[str, typer.Argument(metavar="URL", show_default=False)],
    mode: Annotated[str | None, typer.Option("--mode", metavar="emitter|openai",
                                             help="What URL serves (default emitter).")] = None,
    timeout: Annotated[str | None, typer.Option("--timeout", "-W", metavar="DURATION",
                                                help="Cap on the whole stream (default 30s).")] = None,
    concurrency: Annotated[str | None, typer.Option(
        "--concurrency", metavar="1,2,4,…", help="Sweep: that many streams at once per level.")] = None,
    api_key_file: Annotated[str | None, typer.Option("--api-key-file", metavar="FILE",
                                                     help="openai: file holding the API key.")] = None,
    model: Annotated[str | None, typer.Option("--model", help="openai: the request's model.")] = None,
    max_tokens: Annotated[int | None, typer.Option("--max-tokens", help="openai: the request's max_tokens.")]
    = None,
    as_json: JsonOpt = False,
) -> None:
    """Read an SSE stream as a browser does: first event, gaps, stalls, delay variation (emitter) or
    TTFT/TPOT (openai); with --concurrency, how they climb under load."""
    from netprobe.probes.sse import SseSettings, check_url, sweep

    try:
        check_url(url)
        levels = _levels(concurrency) if concurrency is not None else None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    settings = build_settings(SseSettings, {"mode": mode, "timeout": timeout, "api_key_file": api_key_file,
                                            "model": model, "max_tokens": max_tokens, "every": 10**7},
                              {"mode": "--mode", "timeout": "--timeout", "model": "--model",
                               "max_tokens": "--max-tokens", "api_key_file": "--api-key-file"})
    if levels is not None:
        report = asyncio.run(sweep(url, settings, levels))
        if as_json:
            sys.stdout.write(json.dumps(report.to_dict()) + "\n")
        else:
            from netprobe.probes.render import console, sse_sweep_table

            console().print(sse_sweep_table(report))
        raise typer.Exit(0 if all(lv.errors == 0 for lv in report.levels) else 1)
    from urllib.parse import urlsplit

    target = ProbeTarget(id=url, host=urlsplit(url).hostname or url, url=url)
    results = asyncio.run(run_targets("sse", [target], settings))
    from netprobe.probes.render import sse_table

    emit(results, as_json, False, lambda rs: sse_table([r for r in rs if isinstance(r, SseResult)]))


def _levels(text: str) -> list[int]:
    try:
        levels = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"--concurrency: {text!r} is not a list of numbers like 1,2,4,8") from None
    if not levels or any(n < 1 or n > 1024 for n in levels):
        raise ValueError("--concurrency: levels must be between 1 and 1024")
    return levels
