"""`netprobe probe sse`: read a stream as a browser does, or sweep concurrency levels; their tables."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence
from typing import Annotated
from urllib.parse import urlsplit

import typer
from rich.markup import escape
from rich.table import Table

from netprobe.errors import UsageError
from netprobe.probes.base import ProbeCli, ProbeTarget
from netprobe.probes.cli_common import JsonOpt, build_settings, emit, run_targets
from netprobe.probes.render import console, ms, new_table, status_cell
from netprobe.probes.results import ProbeResult
from netprobe.probes.sse.runtime import (
    SseResult,
    SseSettings,
    SweepReport,
    check_url,
    concurrency_levels,
    run,
    sweep,
)


def table(results: Sequence[ProbeResult]) -> Table:
    t = new_table("sse (ms)", ["url", "mode", "ttfb", "first event", "events", "gap p50", "gap p95",
                               "gap max", "stalls", "delay var p95", "tpot", "status"])
    for r in [r for r in results if isinstance(r, SseResult)]:
        g = r.gaps_ms or {}
        t.add_row(escape(r.url), r.mode, ms(r.ttfb_ms), ms(r.first_event_ms), str(r.events), ms(g.get("p50")),
                  ms(g.get("p95")), ms(g.get("max")), f"{r.stalls} ({ms(r.stall_ms_total)})",
                  ms((r.delay_var_ms or {}).get("p95")), ms(r.tpot_ms), status_cell(r))
    return t


def sse_sweep_table(report: SweepReport) -> Table:
    t = new_table(f"sse concurrency sweep: {escape(report.url)} ({report.mode}, ms)",
               ["concurrency", "ttft p50", "ttft p95", "tpot p50", "tpot p95", "errors"])
    for lv in report.levels:
        ttft, tpot = lv.ttft_ms, lv.tpot_ms
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(lv.error_kinds.items()))
        t.add_row(str(lv.concurrency), ms(ttft.p50 if ttft else None), ms(ttft.p95 if ttft else None),
                  ms(tpot.p50 if tpot else None), ms(tpot.p95 if tpot else None),
                  f"{lv.errors}" + (f" ({kinds})" if kinds else ""))
    return t


def command(
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
    try:
        check_url(url)
        levels = concurrency_levels(concurrency) if concurrency is not None else None
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
            console().print(sse_sweep_table(report))
        raise typer.Exit(0 if all(lv.errors == 0 for lv in report.levels) else 1)
    target = ProbeTarget(id=url, host=urlsplit(url).hostname or url, url=url)
    results = asyncio.run(run_targets(run, [target], settings))
    emit(results, as_json, False, table)


CLI = ProbeCli(command=command, table=table)
