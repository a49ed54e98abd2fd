"""`netprobe probe sse`: read a stream as a browser does, or sweep concurrency levels; their tables."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
from collections.abc import Sequence
from urllib.parse import urlsplit

import click

from netprobe.errors import UsageError
from netprobe.probes.base import ProbeCli, ProbeTarget
from netprobe.probes.cli_common import build_settings, emit, json_opt, run_targets
from netprobe.probes.render import add_status_row, ms, new_table
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
from netprobe.textout import Out, TextTable


def table(results: Sequence[ProbeResult]) -> TextTable:
    t = new_table("sse (ms)", ["url", "mode", "ttfb", "first event", "events", "gap p50", "gap p95",
                               "gap max", "stalls", "delay var p95", "tpot", "status"])
    for r in [r for r in results if isinstance(r, SseResult)]:
        g = r.gaps_ms or {}
        add_status_row(t, r, r.url, r.mode, ms(r.ttfb_ms), ms(r.first_event_ms), str(r.events),
                       ms(g.get("p50")), ms(g.get("p95")), ms(g.get("max")),
                       f"{r.stalls} ({ms(r.stall_ms_total)})", ms((r.delay_var_ms or {}).get("p95")),
                       ms(r.tpot_ms))
    return t


def sse_sweep_table(report: SweepReport) -> TextTable:
    t = new_table(f"sse concurrency sweep: {report.url} ({report.mode}, ms)",
               ["concurrency", "ttft p50", "ttft p95", "tpot p50", "tpot p95", "errors"])
    for lv in report.levels:
        ttft, tpot = lv.ttft_ms, lv.tpot_ms
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(lv.error_kinds.items()))
        t.add_row(str(lv.concurrency), ms(ttft.p50 if ttft else None), ms(ttft.p95 if ttft else None),
                  ms(tpot.p50 if tpot else None), ms(tpot.p95 if tpot else None),
                  f"{lv.errors}" + (f" ({kinds})" if kinds else ""))
    return t


@click.argument("url", metavar="URL")
@click.option("--mode", "mode", metavar="emitter|openai", help="What URL serves (default emitter).")
@click.option("--timeout", "-W", "timeout", metavar="DURATION", help="Cap on the whole stream (default 30s).")
@click.option("--concurrency", "concurrency", metavar="1,2,4,…",
              help="Sweep: that many streams at once per level.")
@click.option("--api-key-file", "api_key_file", metavar="FILE", help="openai: file holding the API key.")
@click.option("--model", "model", help="openai: the request's model.")
@click.option("--max-tokens", "max_tokens", type=int, help="openai: the request's max_tokens.")
@json_opt
def command(url: str, mode: str | None, timeout: str | None, concurrency: str | None,
            api_key_file: str | None, model: str | None, max_tokens: int | None, as_json: bool) -> None:
    """Read an SSE stream as a browser does: first event, gaps, stalls, delay variation (emitter) or
    TTFT/TPOT (openai); with --concurrency, how they climb under load."""
    try:
        check_url(url)
        levels = concurrency_levels(concurrency) if concurrency is not None else None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    settings = build_settings(SseSettings, {"mode": mode, "timeout": timeout, "api_key_file": api_key_file,
                                            "model": model, "max_tokens": max_tokens})
    if levels is not None:
        report = asyncio.run(sweep(url, settings, levels))
        if as_json:
            sys.stdout.write(json.dumps(dataclasses.asdict(report)) + "\n")
        else:
            Out().table(sse_sweep_table(report))
        raise click.exceptions.Exit(0 if all(lv.errors == 0 for lv in report.levels) else 1)
    target = ProbeTarget(id=url, host=urlsplit(url).hostname or url, url=url)
    results = asyncio.run(run_targets(run, [target], settings))
    emit(results, as_json, False, table)


CLI = ProbeCli(command=command)
