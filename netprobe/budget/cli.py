"""`netprobe budget --db URL --ttft-ms N [--tpot-ms N] [--tls 1.2|1.3] [--keepalive] [--calls N] [--json]`,
and its subcommands (`budget vram`). A group whose callback is the budget itself when no subcommand
follows, so `netprobe budget --ttft-ms …` keeps its words."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from netprobe.budget.options import connection_options
from netprobe.errors import UsageError

if TYPE_CHECKING:
    from netprobe.budget.attainment import Server
    from netprobe.report.rows import PeakRow
    from netprobe.report.slo import SloRequest


@click.group("budget", invoke_without_command=True,
             help="What a TTFT target leaves the GPU; GPU memory sizing.")
@click.option("--ttft-ms", metavar="N", type=float, help="time-to-first-token target, ms")
@click.option("--db", metavar="URL", help="database (default: the agent's SQLite file)")
@click.option("--tpot-ms", metavar="N", type=float, help="time-per-output-token target, checked against peak "
              "SSE gaps, stalls and measured TPOT")
@connection_options
@click.option("--days", metavar="N", type=int, default=7, show_default=True, help="local days of data")
@click.option("--window", metavar="START-END", default="20-23", show_default=True,
              help="the peak window, agent-local hours")
@click.option("--region", metavar="R", help="only this region")
@click.option("--json", "json_out", is_flag=True, help="one JSON object on stdout")
@click.option("--slo-ttft-ms", metavar="N", type=float,
              help="SLO: the share of requests whose first token arrives within N ms (SLO attainment); also "
              "the arithmetic's target when --ttft-ms is not given")
@click.option("--slo-tpot-ms", metavar="N", type=float,
              help="SLO: a request must also stream within N ms per token")
@click.option("--server-ttft-ms", metavar="P50,P95|FILE", help="the server's time to first token: a "
              "log-normal through P50 and P95 (ms), or a file of samples (ms, one per line); default: what "
              "openai-mode streams measured, else none")
@click.option("--attainment", metavar="X", type=float, default=95.0, show_default=True,
              help="the GPU budget keeps this share of requests within the SLO, %")
@click.pass_context
def budget(ctx: click.Context, ttft_ms: float | None, db: str | None, tpot_ms: float | None, tls: str,
           keepalive: bool, calls: int, days: int, window: str, region: str | None, json_out: bool,
           slo_ttft_ms: float | None, slo_tpot_ms: float | None, server_ttft_ms: str | None,
           attainment: float) -> None:
    """What a TTFT target leaves the GPU on each candidate route at the evening peak, and
    with --slo-ttft-ms the share of requests that meet it."""
    if ctx.invoked_subcommand is not None:
        return
    if slo_ttft_ms is not None and not 0 < slo_ttft_ms < float("inf"):
        raise UsageError(f"--slo-ttft-ms: must be a positive number of ms, got {slo_ttft_ms:g}")
    target = ttft_ms if ttft_ms is not None else slo_ttft_ms
    if target is None:
        raise UsageError("--ttft-ms: required (the time-to-first-token target, ms), or --slo-ttft-ms")
    import asyncio

    from netprobe.budget.compute import budget_params, budget_rows, candidate

    params = budget_params(target, slo_tpot_ms if slo_tpot_ms is not None else tpot_ms, tls, keepalive, calls)
    slo = _slo(slo_ttft_ms, slo_tpot_ms, server_ttft_ms, attainment, params.round_trips, not keepalive, calls)
    peak = asyncio.run(_peak(db, days, window, region, slo))
    rows = budget_rows([c for c in map(candidate, peak) if c is not None], params)
    if json_out:
        print(json.dumps({"ttft_ms": target, "tpot_ms": params.tpot_ms, "tls": tls, "keepalive": keepalive,
                          "calls": calls, "window": window, "days": days,
                          **({"slo_ttft_ms": slo_ttft_ms, "attainment_target_pct": attainment,
                              "server_ttft_ms": server_ttft_ms} if slo is not None else {}),
                          "rows": [r.to_dict() for r in rows]}))
        return
    from netprobe.budget.table import print_budget, print_slo

    if slo is not None:
        print_slo(rows, slo)
    print_budget(rows, params, worst_case=slo is not None)


def _slo(ttft_ms: float | None, tpot_ms: float | None, server: str | None, pct: float, round_trips: int,
         handshake: bool, calls: int) -> SloRequest | None:
    from netprobe.budget.attainment import SloModel
    from netprobe.report.slo import SloRequest

    if ttft_ms is None:
        for name, value in (("--slo-tpot-ms", tpot_ms), ("--server-ttft-ms", server)):
            if value is not None:
                raise UsageError(f"{name}: needs --slo-ttft-ms")
        return None
    if not 0 < pct < 100:
        raise UsageError(f"--attainment: a percentage between 0 and 100 (exclusive), got {pct:g}")
    model = SloModel(ttft_ms, round_trips=round_trips, handshake=handshake, calls=calls, pct=pct)
    return SloRequest(model, server=_server(server) if server is not None else None, outcome=True, hours=True)


def _server(text: str) -> Server:
    """--server-ttft-ms: P50[,P95] in ms, or a file of samples."""
    from netprobe.budget.attainment import Dist
    from netprobe.stats import lognormal_option

    path = Path(text)
    if not path.exists():
        return lognormal_option(text, "--server-ttft-ms")
    try:
        lines = path.read_text().split()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--server-ttft-ms: cannot read {text}: {exc}") from None
    try:
        samples = [float(v) for v in lines]
    except ValueError as exc:
        raise UsageError(f"--server-ttft-ms: {text}: not a number per line ({exc})") from None
    if not samples or any(not 0 <= v < float("inf") for v in samples):
        raise UsageError(f"--server-ttft-ms: {text}: needs at least one sample, each a finite ms ≥ 0")
    return Dist.of(samples)


async def _peak(db: str | None, days: int, window: str, region: str | None, slo: SloRequest | None
                ) -> list[PeakRow]:
    from netprobe.report.peak import peak_rows
    from netprobe.report.windows import HourWindow
    from netprobe.store.source import open_source

    win = HourWindow.parse(window, "--window")
    if days < 1:
        raise UsageError(f"--days: must be at least 1, got {days}")
    store = await open_source(db)     # plain SQL, without SQLAlchemy, on a database at the head revision
    try:
        # the budget reads the peak window alone, unless attainment wants off-peak and every hour too
        return await peak_rows(store, days, win, region=region, peak_only=slo is None, slo=slo)
    finally:
        await store.close()


@budget.command("vram")
@click.option("--model", metavar="NAME", help="a built-in model: deepseek-r1-distill-qwen-1.5b|-qwen-7b|"
              "-llama-8b|-qwen-14b|-qwen-32b|-llama-70b, deepseek-v2-lite, deepseek-v3, deepseek-r1")
@click.option("--params", metavar="B", type=float, help="parameters, billions (any other model)")
@click.option("--layers", metavar="L", type=int, help="transformer layers")
@click.option("--kv-heads", metavar="H", type=int, help="key/value heads (num_key_value_heads)")
@click.option("--head-dim", metavar="D", type=int, help="width of a head")
@click.option("--kv-lora-rank", metavar="R", type=int,
              help="latent attention (MLA): the cached latent's width")
@click.option("--rope-dim", metavar="D", type=int, help="latent attention (MLA): qk_rope_head_dim")
@click.option("--quant", metavar="fp16|bf16|fp8|int8|int4",
              help="weights' width (default: the published weights', bf16 for other models)")
@click.option("--kv-quant", metavar="bf16|fp16|fp8", default="bf16", show_default=True,
              help="KV cache's width, apart from the weights'")
@click.option("--ctx", metavar="N", type=int, default=8192, show_default=True,
              help="tokens per sequence (prompt + output)")
@click.option("--concurrency", metavar="N", type=int, default=1, show_default=True,
              help="sequences in the batch at once")
@click.option("--gpu-gb", metavar="24,48,80", default="24,48,80", show_default=True,
              help="GPU memory sizes to check, GB (= GiB as cards are sold)")
@click.option("--gpus", metavar="N", type=int, default=1, show_default=True,
              help="GPUs of each size per replica, tensor parallel")
@click.option("--margin-pct", metavar="P", type=float, default=20.0, show_default=True,
              help="margin for activations and fragmentation, % of weights + KV")
@click.option("--json", "json_out", is_flag=True, help="one JSON object on stdout")
def vram(model: str | None, params: float | None, layers: int | None, kv_heads: int | None,
         head_dim: int | None, kv_lora_rank: int | None, rope_dim: int | None, quant: str | None,
         kv_quant: str, ctx: int, concurrency: int, gpu_gb: str, gpus: int, margin_pct: float,
         json_out: bool) -> None:
    """GPU memory for a model: weights + KV cache + margin, and what fits each GPU size."""
    import math
    from fractions import Fraction

    from netprobe.budget import vram as v

    spec: v.ModelSpec | None = None
    if model is not None:
        for option, value in (("--params", params), ("--layers", layers), ("--kv-heads", kv_heads),
                              ("--head-dim", head_dim), ("--kv-lora-rank", kv_lora_rank),
                              ("--rope-dim", rope_dim)):
            if value is not None:
                raise UsageError(f"{option}: not with --model (a built-in model has its own figures)")
        spec = v.find_model(model)
        arch = spec.arch
    else:
        arch = v.custom_architecture(params, layers, kv_heads, head_dim, kv_lora_rank, rope_dim)
    for option, number in (("--ctx", ctx), ("--concurrency", concurrency), ("--gpus", gpus)):
        if number < 1:
            raise UsageError(f"{option}: must be at least 1, got {number}")
    if spec is not None and ctx > spec.max_ctx:
        raise UsageError(f"--ctx: {spec.name} reads at most {spec.max_ctx:,} tokens, got {ctx:,}")
    if not (math.isfinite(margin_pct) and margin_pct >= 0):
        raise UsageError(f"--margin-pct: must be 0 or more, got {margin_pct:g}")
    quant = quant if quant is not None else (spec.weights if spec is not None else "bf16")
    v.check_width(quant, v.WEIGHT_BYTES, "--quant")
    v.check_width(kv_quant, v.KV_BYTES, "--kv-quant")
    est = v.estimate(arch, quant=quant, kv_quant=kv_quant, ctx=ctx, concurrency=concurrency,
                     gpus_gib=v.parse_gpus(gpu_gb), margin_pct=Fraction(repr(margin_pct)), gpus=gpus,
                     model=spec)
    if json_out:
        print(json.dumps(est.to_dict()))
        return
    from netprobe.budget.vram_table import print_vram

    print_vram(est)


app = budget
