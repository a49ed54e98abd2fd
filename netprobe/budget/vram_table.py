"""`netprobe budget vram` for people: the memory, then what fits each GPU size."""

from __future__ import annotations

from typing import TYPE_CHECKING

from netprobe.budget.vram import gib
from netprobe.textout import Out, TextTable

if TYPE_CHECKING:
    from netprobe.budget.vram import VramEstimate


def _gib(v: float) -> str:
    return f"{v:,.2f}"


def _per_token(n: int) -> str:
    return f"{n:,} B ({n / 1024:,.1f} KiB)" if n >= 1024 else f"{n:,} B"


def print_vram(e: VramEstimate, con: Out | None = None) -> None:
    con = con or Out()
    who = e.model or "model"
    seqs = f"{e.concurrency:,} sequence{'s' * (e.concurrency != 1)} × {e.ctx:,} tokens"
    tp = e.gpus > 1
    on = f" · tensor parallel over {e.gpus} GPUs" if tp else ""
    con.print(f"{who} · {e.params / 1e9:,.2f} B parameters · {e.quant} weights · KV cache {e.kv_quant} · "
              f"{seqs}{on}")
    memory = TextTable()
    memory.add_column("memory")
    memory.add_column("GiB", justify="right")
    if tp:
        memory.add_column("per GPU", justify="right")
    memory.add_column("how", justify="left")
    if tp:
        kv_how = (f"{_per_token(e.kv_bytes_per_token_per_gpu)} per token on each of {e.gpus} GPUs × "
                  f"{e.ctx:,} × {e.concurrency:,}")
    else:
        kv_how = f"{_per_token(e.kv_bytes_per_token)} per token × {e.ctx:,} × {e.concurrency:,}"
    for name, size, how in (("weights", e.weights_bytes, f"{e.params:,} parameters × {e.quant}"),
                            ("KV cache", e.kv_cache_bytes, kv_how),
                            ("margin", e.margin_bytes, f"{e.margin_pct:g} % of weights + KV cache"),
                            ("total", e.total_bytes, "")):
        cells = (_gib(gib(size)), _gib(gib(size) / e.gpus)) if tp else (_gib(gib(size)),)
        memory.add_row(name, *cells, how, style="bold" if name == "total" else None)
    con.table(memory)
    con.print(f"KV cache per token: {_per_token(e.kv_bytes_per_token)} = {e.kv_formula}"
              + (" (multi-head latent attention)" if e.attention == "mla" else ""))
    if tp and e.kv_bytes_per_token_per_gpu * e.gpus != e.kv_bytes_per_token:
        why = "the latent is whole on every rank" if e.attention == "mla" else \
            "the KV heads do not split evenly over the GPUs: some are copied"
        con.print(f"  on each GPU: {_per_token(e.kv_bytes_per_token_per_gpu)} ({why})")
    if not e.fits:
        return
    gpus = TextTable()
    for col in ("GPU GiB" if not tp else "GPUs × GiB", "fits", f"max sequences at {e.ctx:,} tokens",
                f"max tokens at {e.concurrency:,} sequence{'s' * (e.concurrency != 1)}",
                "headroom GiB" + (" per GPU" if tp else "")):
        gpus.add_column(col, justify="left" if col == "fits" else "right")
    for f in e.fits:
        verdict = "yes" if f.fits else "no" if f.weights_fit else "no: not even the weights"
        card = f"{f.gpu_gib:g}" if not tp else f"{e.gpus} × {f.gpu_gib:g}"
        gpus.add_row(card, verdict, f"{f.max_concurrency:,}", f"{f.max_ctx:,}",
                     _gib(f.headroom_gib), cell_styles=(None, "green" if f.fits else "red", None, None, None))
    con.table(gpus)
