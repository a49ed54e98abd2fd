"""`netprobe budget`'s body, without typer: netprobe.cli runs a plain `budget --ttft-ms …` from here
without building the command tree (netprobe.plain_args), and the typer group's callback
(budget/cli.py) calls the same function, so both ways print the same."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from netprobe.errors import UsageError

if TYPE_CHECKING:
    from netprobe.plain_args import Kind
    from netprobe.report.rows import PeakRow

# What a plain `budget` takes (netprobe.plain_args), by the typer callback's option names; a word
# that is none of them (a subcommand, --help) goes to the typer tree.
OPTIONS: dict[str, tuple[str, Kind]] = {
    "--ttft-ms": ("ttft_ms", "float"), "--db": ("db", "str"), "--tpot-ms": ("tpot_ms", "float"),
    "--tls": ("tls", "str"), "--keepalive": ("keepalive", "flag"), "--calls": ("calls", "int"),
    "--days": ("days", "int"), "--window": ("window", "str"), "--region": ("region", "str"),
    "--json": ("json_out", "flag")}


def plain_budget(args: list[str]) -> dict[str, Any] | None:
    """budget()'s keyword arguments from the words after `budget`, when they are plain."""
    from netprobe.plain_args import plain_options

    return plain_options(args, OPTIONS)


def budget(ttft_ms: float | None = None, db: str | None = None, tpot_ms: float | None = None,
           tls: str = "1.3", keepalive: bool = False, calls: int = 1, days: int = 7, window: str = "20-23",
           region: str | None = None, json_out: bool = False) -> None:
    """The budget rows, computed and printed."""
    if ttft_ms is None:
        raise UsageError("--ttft-ms: required (the time-to-first-token target, ms)")
    from netprobe.budget.compute import budget_params, budget_rows, candidate

    params = budget_params(ttft_ms, tpot_ms, tls, keepalive, calls)
    peak = asyncio.run(_peak(db, days, window, region))
    rows = budget_rows([c for c in map(candidate, peak) if c is not None], params)
    if json_out:
        print(json.dumps({"ttft_ms": ttft_ms, "tpot_ms": tpot_ms, "tls": tls, "keepalive": keepalive,
                          "calls": calls, "window": window, "days": days,
                          "rows": [r.to_dict() for r in rows]}))
        return
    from netprobe.budget.table import print_budget

    print_budget(rows, params)


async def _peak(db: str | None, days: int, window: str, region: str | None) -> list[PeakRow]:
    from netprobe.report.peak import peak_rows
    from netprobe.report.windows import HourWindow
    from netprobe.store.reads import open_source

    win = HourWindow.parse(window, "--window")
    if days < 1:
        raise UsageError(f"--days: must be at least 1, got {days}")
    store = await open_source(db)     # plain SQL, without SQLAlchemy, on a database at the head revision
    try:
        return await peak_rows(store, days, win, region=region, peak_only=True)
    finally:
        await store.close()


__all__ = ["OPTIONS", "budget", "plain_budget"]
