"""`netprobe diagnose URL …`: where a TTFT target goes over — the route, the model, or capacity.

Exit status: 0 within budget, 1 a segment over budget or the URL failed, 2 bad input (UsageError,
printed by netprobe.cli.main, naming the option).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import click

from netprobe.budget.options import connection_options
from netprobe.errors import UsageError
from netprobe.textout import Out

if TYPE_CHECKING:
    from netprobe.budget.compute import BudgetParams
    from netprobe.probes.sse.runtime import SseSettings

    from .run import Diagnosis


def default_mode(url: str) -> str:
    """An OpenAI-style path means openai; anything else is read as a `netprobe target` emitter."""
    return "openai" if urlsplit(url).path.rstrip("/").endswith("/chat/completions") else "emitter"


def _extra_body(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"--extra-body: not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise UsageError(f"--extra-body: expected a JSON object like '{{\"think_ms\": 500}}', got {text!r}")
    return value


@click.command("diagnose")
@click.argument("url", metavar="URL")
@click.option("--mode", metavar="emitter|openai",
              help="what URL serves (default: openai for …/chat/completions, else emitter)")
@click.option("--ttft-ms", metavar="N", type=float, default=1000.0, show_default=True,
              help="time-to-first-token target, ms")
@click.option("--tpot-ms", metavar="N", type=float, help="time-per-output-token target, ms (checked against "
              "TPOT, gap P95 and stalls)")
@connection_options
@click.option("--db", metavar="URL", help="database with stored peak data (default: the agent's SQLite file, "
              "if there is one)")
@click.option("--days", metavar="N", type=int, default=7, show_default=True, help="local days of stored data")
@click.option("--window", metavar="START-END", default="20-23", show_default=True,
              help="the peak window, agent-local hours")
@click.option("--concurrency", metavar="1,2,4,…", default="1,2,4,8", show_default=True,
              help="sweep levels: that many streams at once")
@click.option("--api-key-file", metavar="FILE", help="openai: file holding the API key")
@click.option("--model", help="openai: the request's model")
@click.option("--max-tokens", type=int, help="openai: the request's max_tokens")
@click.option("--extra-body", metavar="JSON", help="openai: more request body keys, a JSON object")
@click.option("--timeout", "-W", metavar="DURATION", help="cap on one stream (default 30s)")
@click.option("--json", "json_out", is_flag=True, help="one JSON object on stdout")
def diagnose(url: str, mode: str | None, ttft_ms: float, tpot_ms: float | None, tls: str, keepalive: bool,
             calls: int, db: str | None, days: int, window: str, concurrency: str, api_key_file: str | None,
             model: str | None, max_tokens: int | None, extra_body: str | None, timeout: str | None,
             json_out: bool) -> None:
    """Diagnose a slow first token: network floor, one request, a concurrency sweep, then which segment
    is over budget — route/region, model/framework, or capacity.

    URL: the SSE URL: an emitter's /sse or an OpenAI-style /v1/chat/completions"""
    from netprobe.budget.compute import budget_params
    from netprobe.compare.load import read_key_file
    from netprobe.probes.cli_common import build_settings
    from netprobe.probes.sse.runtime import SseSettings, check_url, concurrency_levels
    from netprobe.report.windows import HourWindow

    from .steps import url_host_port

    try:
        check_url(url)
    except ValueError as exc:
        raise UsageError(f"URL: {exc}") from None
    url_host_port(url)   # a bad port is a usage error too
    try:
        levels = concurrency_levels(concurrency)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    params = budget_params(ttft_ms, tpot_ms, tls, keepalive, calls)
    if days < 1:
        raise UsageError(f"--days: must be at least 1, got {days}")
    HourWindow.parse(window, "--window")
    settings = build_settings(SseSettings, {
        "mode": mode or default_mode(url), "timeout": timeout, "api_key_file": api_key_file,
        "model": model, "max_tokens": max_tokens, "extra_body": _extra_body(extra_body)})
    if settings.mode == "openai" and api_key_file:
        read_key_file(api_key_file)

    result = asyncio.run(_run(url, settings, params, levels, db, days, window, json_out))
    if json_out:
        sys.stdout.write(json.dumps(result.to_dict()) + "\n")
        sys.stdout.flush()
    raise click.exceptions.Exit(0 if result.verdict.within_budget else 1)


async def _run(url: str, settings: SseSettings, params: BudgetParams, levels: list[int], db: str | None,
               days: int, window: str, json_out: bool) -> Diagnosis:

    from .render import print_conclusion, print_step
    from .run import diagnose as run_diagnosis

    con = None if json_out else Out()
    show = None if con is None else (lambda step: print_step(con, step))
    result = await run_diagnosis(url, settings, params, levels, db=db, days=days, window=window, show=show)
    if con is not None:
        print_conclusion(con, result)
    return result
