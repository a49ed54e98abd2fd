"""`netprobe budget vram` for people: the memory, then what fits each GPU size."""

from __future__ import annotations

from typing import TYPE_CHECKING

from netprobe.budget.vram import gib
from netprobe.probes.render import console
from netprobe.report.text_table import TextTable

if TYPE_CHECKING:
    from rich.console import Console

    from netprobe.budget.vram import VramEstimate


def _gib(v: float) -> str:
    return f"{v:,.2f}"


def _per_token(n: int) -> str:
    return f"{n:,} B ({n / 1024:,.1f} KiB)" if n >= 1024 else f"{n:,} B"


def print_vram(e: VramEstimate, con: Console | None = None) -> None:
    con = con or console()
    who = e.model or "model"
    seqs = f"{e.concurrency:,} sequence{'s' * (e.concurrency != 1)} × {e.ctx:,} tokens"
    con.print(f"{who} · {e.params / 1e9:,.2f} B parameters · {e.quant} weights · KV cache {e.kv_quant} · "
              f"{seqs}", highlight=False)
    memory = TextTable()
    memory.add_column("memory")
    memory.add_column("GiB", justify="right")
    memory.add_column("how", justify="left")
    memory.add_row("weights", _gib(gib(e.weights_bytes)), f"{e.params:,} parameters × {e.quant}")
    memory.add_row("KV cache", _gib(gib(e.kv_cache_bytes)),
                   f"{_per_token(e.kv_bytes_per_token)} per token × {e.ctx:,} × {e.concurrency:,}")
    memory.add_row("margin", _gib(gib(e.margin_bytes)), f"{e.margin_pct:g} % of weights + KV cache")
    memory.add_row("total", _gib(gib(e.total_bytes)), "", style="bold")
    memory.print(con)
    con.print(f"KV cache per token: {_per_token(e.kv_bytes_per_token)} = {e.kv_formula}"
              + (" (multi-head latent attention)" if e.attention == "mla" else ""), highlight=False)
    if not e.fits:
        return
    gpus = TextTable()
    for col in ("GPU GiB", "fits", f"max sequences at {e.ctx:,} tokens",
                f"max tokens at {e.concurrency:,} sequence{'s' * (e.concurrency != 1)}", "headroom GiB"):
        gpus.add_column(col, justify="left" if col == "fits" else "right")
    for f in e.fits:
        verdict = "yes" if f.fits else "no" if f.weights_fit else "no: not even the weights"
        gpus.add_row(f"{f.gpu_gib:g}", verdict, f"{f.max_concurrency:,}", f"{f.max_ctx:,}",
                     _gib(f.headroom_gib), cell_styles=(None, "green" if f.fits else "red", None, None, None))
    gpus.print(con)
