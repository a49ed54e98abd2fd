"""`netprobe compare URL [URL…] [--concurrency 1,4,16 | --rate R] [--requests N] [--slo-ttft-ms N]
[--json|--md]`: the same prompts against OpenAI-compatible endpoints, side by side (docs/numbers.md)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import click

from netprobe.compare.load import read_key_file
from netprobe.errors import UsageError

if TYPE_CHECKING:
    from netprobe.compare.load import Prompt
    from netprobe.compare.report import CompareReport
    from netprobe.compare.request import Endpoint
    from netprobe.compare.run import Plan

def chat_url(url: str) -> str:
    """A base URL (http://host:8000, …/v1) or the full …/chat/completions: where to POST."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"URL: {url!r} is not an http(s) URL")
    try:
        parts.port  # noqa: B018 (a bad port raises here)
    except ValueError:
        raise UsageError(f"URL: bad port in {url!r}") from None
    path = parts.path.rstrip("/")
    if not path.endswith("/chat/completions"):
        path += "/chat/completions" if path.endswith("/v1") else "/v1/chat/completions"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def read_key(key_file: Path | None, key_env: str | None) -> str | None:
    if key_file is not None and key_env is not None:
        raise UsageError("--api-key-file and --api-key-env: give one")
    if key_file is not None:
        return read_key_file(key_file)
    if key_env is not None:
        value = os.environ.get(key_env)
        if not value:
            raise UsageError(f"--api-key-env: ${key_env} is not set")
        return value.strip()
    return None


def extra(text: str | None) -> dict[str, Any]:
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"--extra-body: not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise UsageError('--extra-body: must be a JSON object, like {"ignore_eos": true}')
    return value


@click.command("compare")
@click.argument("urls", nargs=-1, required=True, metavar="URL [URL…]")
@click.option("--concurrency", metavar="1,4,16", help="levels: that many requests in flight (default 1)")
@click.option("--rate", metavar="R[,R…]", help="levels: requests per second, Poisson arrivals")
@click.option("--burstiness", type=float, default=1.0, show_default=True, help="with --rate: gamma shape of "
              "the inter-arrival times as vllm bench serve (1 Poisson, < 1 burstier)")
@click.option("--seed", type=int, default=0, show_default=True, help="arrival times and synthetic prompts")
@click.option("--requests", metavar="N", type=int, default=32, show_default=True, help="requests per level")
@click.option("--warmup", metavar="N", type=int, default=0, show_default=True,
              help="requests before each level, not counted")
@click.option("--prompt-words", metavar="N", type=int, default=128, show_default=True,
              help="synthetic prompts of N words")
@click.option("--output-tokens", metavar="N", type=int, default=64, show_default=True,
              help="max_tokens per request")
@click.option("--prompts", metavar="FILE.jsonl", type=click.Path(path_type=Path),
              help='one {"prompt": …} or {"messages": […]} a line')
@click.option("--model", default="deepseek-chat", show_default=True, help="the request's model")
@click.option("--api-key-file", metavar="FILE", type=click.Path(path_type=Path), help="bearer key")
@click.option("--api-key-env", metavar="VAR", help="bearer key")
@click.option("--extra-body", metavar="JSON", help="more request body keys (ignore_eos, …)")
@click.option("--timeout", metavar="S", type=float, default=120.0, show_default=True,
              help="cap on one request")
@click.option("--slo-ttft-ms", metavar="N", type=float, help="goodput's TTFT")
@click.option("--slo-tpot-ms", metavar="N", type=float, help="goodput's TPOT")
@click.option("--db", metavar="URL", help="agent data: take the route's network floor off TTFT")
@click.option("--days", metavar="N", type=int, default=7, show_default=True,
              help="with --db: local days of data")
@click.option("--window", metavar="START-END", default="20-23", show_default=True,
              help="with --db: the peak window")
@click.option("--json", "json_out", is_flag=True, help="one JSON object on stdout")
@click.option("--md", "md_out", is_flag=True, help="the Markdown framework table")
def compare(urls: tuple[str, ...], concurrency: str | None, rate: str | None, burstiness: float, seed: int,
            requests: int, warmup: int, prompt_words: int, output_tokens: int, prompts: Path | None,
            model: str, api_key_file: Path | None, api_key_env: str | None, extra_body: str | None,
            timeout: float, slo_ttft_ms: float | None, slo_tpot_ms: float | None, db: str | None, days: int,
            window: str, json_out: bool, md_out: bool) -> None:
    """Compare OpenAI-compatible endpoints with the same prompts: TTFT, TPOT, ITL, E2E, tokens/s,
    goodput and errors per concurrency level or request rate.

    URL [URL…]: OpenAI-compatible base URLs (or …/chat/completions); the first is the baseline"""
    if json_out and md_out:
        raise UsageError("--json and --md: choose one")
    plan = _plan(concurrency, rate, burstiness, seed, requests, warmup, prompt_words, output_tokens,
                 prompts, timeout)
    for name, v in (("--slo-ttft-ms", slo_ttft_ms), ("--slo-tpot-ms", slo_tpot_ms)):
        if v is not None and not v > 0:
            raise UsageError(f"{name}: must be above 0, got {v:g}")
    key = read_key(api_key_file, api_key_env)
    body = extra(extra_body)
    endpoints = [_endpoint(u, model, key, body) for u in urls]
    described = str(prompts) if prompts else f"synthetic: {prompt_words} words, {output_tokens} tokens out"
    report = asyncio.run(_run(endpoints, plan, described, model, slo_ttft_ms, slo_tpot_ms, db, days, window,
                              burstiness if rate else None))
    _print(report, json_out, md_out)
    if any(e.all_failed for e in report.endpoints):
        raise click.exceptions.Exit(1)


def _endpoint(url: str, model: str, key: str | None, body: dict[str, Any]) -> Endpoint:
    from netprobe.compare.request import Endpoint

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return Endpoint(url=url, post_url=chat_url(url), model=model, headers=headers, extra_body=body)


def _plan(concurrency: str | None, rate: str | None, burstiness: float, seed: int, requests: int,
          warmup: int, words: int, tokens: int, prompts: Path | None, timeout: float) -> Plan:
    from netprobe.compare.load import cycle, from_jsonl, parse_levels, synthetic
    from netprobe.compare.run import Level, Plan
    from netprobe.probes.sse.client import Limits

    if concurrency is not None and rate is not None:
        raise UsageError("--concurrency and --rate: choose one (fixed concurrency or a request rate)")
    checks = (("--requests", requests, 1, 100_000), ("--warmup", warmup, 0, 100_000),
              ("--prompt-words", words, 1, 1_000_000), ("--output-tokens", tokens, 1, 1_000_000))
    for name, value, low, high in checks:
        if not low <= value <= high:
            raise UsageError(f"{name}: must be in {low}..{high}, got {value}")
    if not burstiness > 0:
        raise UsageError(f"--burstiness: must be above 0, got {burstiness:g}")
    if not 0 < timeout <= 3600:
        raise UsageError(f"--timeout: must be in (0, 3600] seconds, got {timeout:g}")
    if rate is not None:
        levels = tuple(Level(rate=r) for r in parse_levels(rate, "--rate", float))
    else:
        levels = tuple(Level(concurrency=c) for c in parse_levels(concurrency or "1", "--concurrency", int))
    base: list[Prompt] = from_jsonl(prompts, tokens) if prompts else synthetic(requests, words, tokens, seed)
    return Plan(levels=levels, prompts=tuple(cycle(base, requests)), seed=seed, burstiness=burstiness,
                warmup=warmup, limits=Limits(total_s=timeout, connect_s=min(10.0, timeout),
                                             idle_s=min(60.0, timeout)))


async def _run(endpoints: list[Endpoint], plan: Plan, described: str, model: str, slo_ttft: float | None,
               slo_tpot: float | None, db: str | None, days: int, window: str,
               burstiness: float | None) -> CompareReport:
    from netprobe.compare.figures import Slo, level_figures
    from netprobe.compare.floor import Floor, floors
    from netprobe.compare.report import CompareReport, EndpointResult
    from netprobe.compare.run import run_endpoint

    found = await floors(db, [e.url for e in endpoints], days, window) if db else {}
    slo = Slo(slo_ttft, slo_tpot)
    out = []
    for ep in endpoints:     # one at a time: endpoints do not compete for this host's CPU or uplink
        runs = await run_endpoint(ep, plan)
        f = found.get(ep.url)
        floor = f if isinstance(f, Floor) else None
        out.append(EndpointResult(ep.url, tuple(level_figures(r, slo, floor.rtt_p50_ms if floor else None)
                                                for r in runs), floor, f if isinstance(f, str) else None))
    return CompareReport(endpoints=tuple(out), model=model, requests=len(plan.prompts), warmup=plan.warmup,
                         prompt=described, slo_ttft_ms=slo_ttft, slo_tpot_ms=slo_tpot, burstiness=burstiness,
                         seed=plan.seed)


def _print(report: CompareReport, json_out: bool, md_out: bool) -> None:
    if json_out:
        print(json.dumps(report.to_dict()))
    elif md_out:
        from netprobe.compare.render import markdown

        print(markdown(report), end="")
    else:
        from netprobe.compare.render import print_compare

        print_compare(report)
