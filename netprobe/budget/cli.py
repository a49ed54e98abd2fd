"""`netprobe budget --db URL --ttft-ms N [--tpot-ms N] [--tls 1.2|1.3] [--keepalive] [--calls N] [--json]`,
and its subcommands (`budget vram`). A group whose callback is the budget itself when no subcommand
follows, so `netprobe budget --ttft-ms …` keeps its words."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from netprobe.errors import UsageError

app = typer.Typer(add_completion=False)


@app.callback(invoke_without_command=True)
def budget(
    ctx: typer.Context,
    ttft_ms: Annotated[float | None, typer.Option("--ttft-ms", metavar="N",
                                                  help="time-to-first-token target, ms")] = None,
    db: Annotated[str | None, typer.Option("--db", metavar="URL",
                                           help="database (default: the agent's SQLite file)")] = None,
    tpot_ms: Annotated[float | None, typer.Option(
        "--tpot-ms", metavar="N", help="time-per-output-token target, checked against peak SSE gaps, "
        "stalls and measured TPOT")] = None,
    tls: Annotated[str, typer.Option("--tls", metavar="1.2|1.3",
                                     help="TLS version of a new connection")] = "1.3",
    keepalive: Annotated[bool, typer.Option("--keepalive",
                                            help="a warm connection: one round trip")] = False,
    calls: Annotated[int, typer.Option("--calls", metavar="N",
                                       help="model calls in series per answer (agent workflows)")] = 1,
    days: Annotated[int, typer.Option("--days", metavar="N", help="local days of data")] = 7,
    window: Annotated[str, typer.Option("--window", metavar="START-END",
                                        help="the peak window, agent-local hours")] = "20-23",
    region: Annotated[str | None, typer.Option("--region", metavar="R", help="only this region")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="one JSON object on stdout")] = False,
    slo_ttft_ms: Annotated[float | None, typer.Option(
        "--slo-ttft-ms", metavar="N", help="SLO: the share of requests whose first token arrives within N "
        "ms (SLO attainment); also the arithmetic's target when --ttft-ms is not given")] = None,
    slo_tpot_ms: Annotated[float | None, typer.Option(
        "--slo-tpot-ms", metavar="N", help="SLO: a request must also stream within N ms per token")] = None,
    server_ttft_ms: Annotated[str | None, typer.Option(
        "--server-ttft-ms", metavar="P50,P95|FILE", help="the server's time to first token: a log-normal "
        "through P50 and P95 (ms), or a file of samples (ms, one per line); default: what openai-mode "
        "streams measured, else none")] = None,
    attainment: Annotated[float, typer.Option(
        "--attainment", metavar="X", help="the GPU budget keeps this share of requests within the SLO, "
        "%")] = 95.0,
) -> None:
    """What a TTFT target leaves the GPU on each candidate route at the evening peak, and
    with --slo-ttft-ms the share of requests that meet it."""
    if ctx.invoked_subcommand is not None:
        return
    from netprobe.budget.run import budget as run_budget  # also netprobe.cli's way without typer

    run_budget(ttft_ms, db, tpot_ms, tls, keepalive, calls, days, window, region, json_out, slo_ttft_ms,
               slo_tpot_ms, server_ttft_ms, attainment)


@app.command("vram")
def vram(
    model: Annotated[str | None, typer.Option(
        "--model", metavar="NAME", help="a built-in model: deepseek-r1-distill-qwen-1.5b|-qwen-7b|-llama-8b|"
        "-qwen-14b|-qwen-32b|-llama-70b, deepseek-v2-lite, deepseek-v3, deepseek-r1")] = None,
    params: Annotated[float | None, typer.Option("--params", metavar="B",
                                                 help="parameters, billions (any other model)")] = None,
    layers: Annotated[int | None, typer.Option("--layers", metavar="L", help="transformer layers")] = None,
    kv_heads: Annotated[int | None, typer.Option("--kv-heads", metavar="H",
                                                 help="key/value heads (num_key_value_heads)")] = None,
    head_dim: Annotated[int | None, typer.Option("--head-dim", metavar="D", help="width of a head")] = None,
    kv_lora_rank: Annotated[int | None, typer.Option(
        "--kv-lora-rank", metavar="R", help="latent attention (MLA): the cached latent's width")] = None,
    rope_dim: Annotated[int | None, typer.Option(
        "--rope-dim", metavar="D", help="latent attention (MLA): qk_rope_head_dim")] = None,
    quant: Annotated[str | None, typer.Option(
        "--quant", metavar="fp16|bf16|fp8|int8|int4",
        help="weights' width (default: the published weights', bf16 for other models)")] = None,
    kv_quant: Annotated[str, typer.Option("--kv-quant", metavar="bf16|fp16|fp8",
                                          help="KV cache's width, apart from the weights'")] = "bf16",
    ctx: Annotated[int, typer.Option("--ctx", metavar="N", help="tokens per sequence (prompt + output)")
                   ] = 8192,
    concurrency: Annotated[int, typer.Option("--concurrency", metavar="N",
                                             help="sequences in the batch at once")] = 1,
    gpu_gb: Annotated[str, typer.Option("--gpu-gb", metavar="24,48,80",
                                        help="GPU memory sizes to check, GB (= GiB as cards are sold)")
                      ] = "24,48,80",
    gpus: Annotated[int, typer.Option("--gpus", metavar="N",
                                      help="GPUs of each size per replica, tensor parallel")] = 1,
    margin_pct: Annotated[float, typer.Option(
        "--margin-pct", metavar="P", help="margin for activations and fragmentation, % of weights + KV")
                          ] = 20.0,
    json_out: Annotated[bool, typer.Option("--json", help="one JSON object on stdout")] = False,
) -> None:
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
