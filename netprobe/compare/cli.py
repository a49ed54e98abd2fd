"""`netprobe compare URL [URL…] [--concurrency 1,4,16 | --rate R] [--requests N] [--slo-ttft-ms N]
[--json|--md]`: the same prompts against OpenAI-compatible endpoints, side by side (docs/numbers.md)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import urlsplit, urlunsplit

import typer

from netprobe.compare.load import read_key_file
from netprobe.errors import UsageError

if TYPE_CHECKING:
    from netprobe.compare.load import Prompt
    from netprobe.compare.report import CompareReport
    from netprobe.compare.request import Endpoint
    from netprobe.compare.run import Plan

Opt = typer.Option


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


def compare(
    urls: Annotated[list[str], typer.Argument(metavar="URL [URL…]", show_default=False,
                                              help="OpenAI-compatible base URLs (or …/chat/completions); "
                                                   "the first is the baseline")],
    concurrency: Annotated[str | None, Opt("--concurrency", metavar="1,4,16",
                                           help="levels: that many requests in flight (default 1)")] = None,
    rate: Annotated[str | None, Opt("--rate", metavar="R[,R…]",
                                    help="levels: requests per second, Poisson arrivals")] = None,
    burstiness: Annotated[float, Opt("--burstiness", help="with --rate: gamma shape of the inter-arrival "
                                     "times as vllm bench serve (1 Poisson, < 1 burstier)")] = 1.0,
    seed: Annotated[int, Opt("--seed", help="arrival times and synthetic prompts")] = 0,
    requests: Annotated[int, Opt("--requests", metavar="N", help="requests per level")] = 32,
    warmup: Annotated[int, Opt("--warmup", metavar="N", help="requests before each level, not counted")] = 0,
    prompt_words: Annotated[int, Opt("--prompt-words", metavar="N",
                                     help="synthetic prompts of N words")] = 128,
    output_tokens: Annotated[int, Opt("--output-tokens", metavar="N", help="max_tokens per request")] = 64,
    prompts: Annotated[Path | None, Opt("--prompts", metavar="FILE.jsonl",
                                        help='one {"prompt": …} or {"messages": […]} a line')] = None,
    model: Annotated[str, Opt("--model", help="the request's model")] = "deepseek-chat",
    api_key_file: Annotated[Path | None, Opt("--api-key-file", metavar="FILE", help="bearer key")] = None,
    api_key_env: Annotated[str | None, Opt("--api-key-env", metavar="VAR", help="bearer key")] = None,
    extra_body: Annotated[str | None, Opt("--extra-body", metavar="JSON",
                                          help="more request body keys (ignore_eos, …)")] = None,
    timeout: Annotated[float, Opt("--timeout", metavar="S", help="cap on one request")] = 120.0,
    slo_ttft_ms: Annotated[float | None, Opt("--slo-ttft-ms", metavar="N", help="goodput's TTFT")] = None,
    slo_tpot_ms: Annotated[float | None, Opt("--slo-tpot-ms", metavar="N", help="goodput's TPOT")] = None,
    db: Annotated[str | None, Opt("--db", metavar="URL", help="agent data: take the route's network "
                                  "floor off TTFT")] = None,
    days: Annotated[int, Opt("--days", metavar="N", help="with --db: local days of data")] = 7,
    window: Annotated[str, Opt("--window", metavar="START-END", help="with --db: the peak window")] = "20-23",
    json_out: Annotated[bool, Opt("--json", help="one JSON object on stdout")] = False,
    md_out: Annotated[bool, Opt("--md", help="the Markdown framework table")] = False,
) -> None:
    """Compare OpenAI-compatible endpoints with the same prompts: TTFT, TPOT, ITL, E2E, tokens/s,
    goodput and errors per concurrency level or request rate."""
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
        raise typer.Exit(1)


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
