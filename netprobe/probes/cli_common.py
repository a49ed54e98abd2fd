"""What every `netprobe probe <name>` command shares: settings from options, targets from arguments
and -f FILE, one paced round per target, and printing (JSON or the probe's table) with its exit status.

All targets of one command run concurrently through one ProbeContext (one ICMP engine, one
resolver), paced like fping -p/-i: target i of N starts at i·interval/N, so the requests of a round
leave evenly over the interval, not as one burst; the ICMP engine's rate cap (--rate) holds on top.
Exit status: 0 every target ok, 1 some target failed (100 % loss, refused,
unresolvable — data), 2 bad input (raised as UsageError, printed by netprobe.cli.main).
"""

from __future__ import annotations

import asyncio
import json
import math
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import click
from pydantic import ValidationError

from netprobe.errors import UsageError
from netprobe.net.pacing import launch_paced
from netprobe.net.resolve import Resolver, family_name, parse_literal
from netprobe.net.targets_file import MAX_TARGETS, read_targets
from netprobe.probes import reflector
from netprobe.probes.base import ProbeContext, ProbeRun, ProbeTarget
from netprobe.probes.render import print_table
from netprobe.probes.results import ProbeResult
from netprobe.probes.settings import ProbeSettings, RoundSettings
from netprobe.textout import TextTable

S = TypeVar("S", bound=ProbeSettings)
T = TypeVar("T")

FLAGS = {"max_rate": "--rate"}      # the options not named --field-name


def build_settings(model: type[S], options: dict[str, Any], flags: Mapping[str, str] = FLAGS) -> S:
    """Validate CLI options through the probe's settings model, so errors read like config errors: a
    field is named by its option, --field-name unless `flags` names another (max_rate: --rate).

    `every` does not apply to a one-off run; it is set to infinity, so that any round fits in it.
    """
    values = {k: v for k, v in options.items() if v is not None}
    values.setdefault("every", math.inf)
    try:
        return model(**values)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            field = str(err["loc"][0]) if err["loc"] else ""
            msg = str(err["msg"]).removeprefix("Value error, ")
            flag = flags.get(field, "--" + field.replace("_", "-"))
            problems.append(f"{flag}: {msg}" if field else msg)
        raise UsageError("; ".join(problems)) from None


def address_family(ipv4: bool, ipv6: bool) -> int:
    if ipv4 and ipv6:
        raise UsageError("-4 and -6 exclude each other")
    return socket.AF_INET if ipv4 else socket.AF_INET6 if ipv6 else 0


def check_family(host: str, family: int) -> str:
    """`host`; an address literal of the other family than -4/-6 asks for is a usage error, not data."""
    addr = parse_literal(host)
    if addr is None or not family:
        return host
    got = socket.AF_INET if addr.version == 4 else socket.AF_INET6
    if got != family:
        flag = "-4" if family == socket.AF_INET else "-6"
        raise ValueError(f"{host} is {family_name(got)} but {flag} asks for {family_name(family)}")
    return host


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


async def run_targets(run: ProbeRun[S, ProbeResult], targets: Sequence[ProbeTarget], settings: S,
                      spread: float = 0.0, ctx: ProbeContext | None = None) -> list[ProbeResult]:
    """One round of the probe's `run` per target through one shared ProbeContext; target i of N starts
    at i·spread/N (fping's -p/-i schedule), every target's round then runs on its own."""
    ctx = ctx or ProbeContext(resolver=Resolver())
    failed = asyncio.Event()

    async def one(target: ProbeTarget) -> ProbeResult:
        try:
            return await run(target, settings, ctx)
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


def emit(results: Sequence[ProbeResult], as_json: bool, as_list: bool,
         table: Callable[[Sequence[ProbeResult]], TextTable] | None) -> None:
    """Print results (one JSON object, or a table; None: the command drew its own) and exit 0 if every
    target is ok, else 1."""
    if as_json:
        body: dict[str, Any] = (
            {"results": [r.to_dict() for r in results]} if as_list else results[0].to_dict())
        sys.stdout.write(json.dumps(body) + "\n")
        sys.stdout.flush()
    elif table is not None:
        print_table(table(results), results)
    raise click.exceptions.Exit(0 if all(r.status == "ok" for r in results) else 1)


# options the probes' commands share, as decorators of their command functions
file_opt = click.option("--file", "-f", "file", metavar="FILE",
                        help="Read targets from FILE, one per line ('-' = stdin).")
count_opt = click.option("--count", "-c", "count", type=int, help="Requests per target.")
interval_opt = click.option("--interval", "-i", "interval", metavar="DURATION",
                            help="Time between requests: 500ms, 0.2, 1s.")
timeout_opt = click.option("--timeout", "-W", "timeout", metavar="DURATION", help="Per-request timeout.")
v4_opt = click.option("-4", "ipv4", is_flag=True, help="IPv4 only.")
v6_opt = click.option("-6", "ipv6", is_flag=True, help="IPv6 only.")
json_opt = click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
token_file_opt = click.option(
    "--token-file", "token_file", metavar="FILE", default="", help="This agent's reflector token (`netprobe "
    f"target add-agent` printed it); default: ${reflector.TOKEN_ENV}.")


def round_defaults(model: type[RoundSettings], what: str) -> str:
    d = model()
    return f"Defaults: --count {d.count} {what} {d.interval:g}s apart, --timeout {d.timeout:g}s."

