"""GPU memory sizing (docs/numbers.md, docs/api.md `budget vram`): memory = weights + KV cache + margin.

- **Weights** = parameters × bytes per parameter: fp16/bf16 2, fp8 and int8 1, int4 0.5 plus one fp16
  scale per group of 128 weights (GPTQ/AWQ's usual group size): 0.5 + 2/128 = 0.515625 B. fp8 and int8
  scales (per channel, or per 128 × 128 block as DeepSeek-V3's fp8 weights have) cost under 0.03 % and
  are left out. Every parameter is counted at the chosen width, embeddings and output head included
  (quantisers often keep those at bf16: int4 figures are then a little low).
- **KV cache** = bytes per token × context tokens × concurrent sequences. Per token: standard (grouped
  query) attention keeps a key and a value per layer and KV head, 2 × layers × KV heads × head dim ×
  bytes; multi-head latent attention (DeepSeek-V2/V3/R1) keeps one compressed latent and one rotary key
  per layer, layers × (kv_lora_rank + qk_rope_head_dim) × bytes, as vLLM and SGLang store it.
  The KV cache has its own width (`kv_quant`), bf16 by default whatever the weights' width: vLLM keeps
  it in the model's dtype unless told `--kv-cache-dtype fp8`.
- **Margin** = 20 % (by default) of weights + KV cache: activations, the CUDA context, fragmentation.
- **Several GPUs** (`gpus`, tensor parallel): each holds 1/gpus of the weights and its rank's KV cache.
  KV heads split over the ranks, at least one each; latent attention's latent is shared by all heads,
  so every rank caches it whole (vLLM: "MLA is always replicated as the hidden dim can't be split",
  quoted in vllm-project/vllm#47929), and the replica's KV cache is gpus × the single-GPU figure.

GiB = 2³⁰ bytes. A GPU's size is taken in the same unit: an "80 GB" H100 shows 81,559 MiB.
Arithmetic is exact (fractions): a sequence that fits to the byte fits.

The built-in figures come from each model's published configuration (Hugging Face config.json;
DeepSeek-V3's repository, inference/configs/config_671B.json and config_16B.json); parameter counts
are what those figures add up to, checked against the published totals in tests/unit/budget/test_vram.py.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any

from netprobe.errors import UsageError

GIB = 2 ** 30
INT4_GROUP = 128          # weights per int4 scale
INT4_SCALE_BYTES = 2      # one fp16 scale per group

# width name → bytes per weight (bf16 is fp16's width; both names are accepted)
WEIGHT_BYTES: dict[str, Fraction] = {
    "fp16": Fraction(2), "bf16": Fraction(2), "fp8": Fraction(1), "int8": Fraction(1),
    "int4": Fraction(1, 2) + Fraction(INT4_SCALE_BYTES, INT4_GROUP),
}
KV_BYTES: dict[str, int] = {"fp16": 2, "bf16": 2, "fp8": 1}


@dataclass(frozen=True, slots=True)
class Architecture:
    """What the sizing needs of a model: its parameter count and what its attention caches."""

    params: int                        # parameters, exactly
    layers: int
    kv_heads: int | None = None        # standard attention: key/value heads (GQA) and their width
    head_dim: int | None = None
    kv_lora_rank: int | None = None    # multi-head latent attention: the compressed latent …
    rope_dim: int | None = None        # … and the decoupled rotary key (qk_rope_head_dim)

    @property
    def mla(self) -> bool:
        return self.kv_lora_rank is not None

    @property
    def kv_elements_per_token(self) -> int:
        """Values cached per token across all layers."""
        if self.kv_lora_rank is not None and self.rope_dim is not None:
            return self.layers * (self.kv_lora_rank + self.rope_dim)
        assert self.kv_heads is not None and self.head_dim is not None
        return 2 * self.layers * self.kv_heads * self.head_dim

    def kv_elements_per_token_per_gpu(self, gpus: int) -> int:
        """What each of `gpus` tensor-parallel ranks caches per token. Latent attention's latent is
        shared by all heads, so every rank keeps it whole (vLLM's tensor parallelism; SGLang's DP
        attention is the way around it); KV heads are split, at least one per rank (copied when there
        are fewer heads than ranks)."""
        if self.mla or gpus == 1:
            return self.kv_elements_per_token
        assert self.kv_heads is not None and self.head_dim is not None
        return 2 * self.layers * max(1, -(-self.kv_heads // gpus)) * self.head_dim

    def formula(self, kv_bytes: int) -> str:
        """The per-token figure written out, for people."""
        if self.mla:
            return (f"{self.layers} layers × ({self.kv_lora_rank} latent + {self.rope_dim} rope) × "
                    f"{kv_bytes} B")
        return (f"2 × {self.layers} layers × {self.kv_heads} KV heads × {self.head_dim} head dim × "
                f"{kv_bytes} B")


@dataclass(frozen=True, slots=True)
class ModelSpec:
    name: str
    hf_id: str
    arch: Architecture
    max_ctx: int                      # max_position_embeddings
    weights: str                      # the published weights' width: the default --quant
    aliases: tuple[str, ...] = ()


def _distill(size: str, base: str, params: int, layers: int, kv_heads: int, aliases: tuple[str, ...]
             ) -> ModelSpec:
    return ModelSpec(
        name=f"deepseek-r1-distill-{base}-{size}", hf_id=f"deepseek-ai/DeepSeek-R1-Distill-{base.title()}-"
        f"{size.upper()}", arch=Architecture(params=params, layers=layers, kv_heads=kv_heads, head_dim=128),
        max_ctx=131_072, weights="bf16", aliases=aliases)


_V3 = Architecture(params=671_026_419_200, layers=61, kv_lora_rank=512, rope_dim=64)

# config.json figures: num_hidden_layers, num_key_value_heads, head_dim (= hidden_size /
# num_attention_heads where absent), kv_lora_rank, qk_rope_head_dim, max_position_embeddings.
MODELS: tuple[ModelSpec, ...] = (
    _distill("1.5b", "qwen", 1_777_088_000, 28, 2, ("r1-distill-qwen-1.5b", "deepseek-r1:1.5b")),
    _distill("7b", "qwen", 7_615_616_512, 28, 4, ("r1-distill-qwen-7b", "deepseek-r1:7b")),
    _distill("8b", "llama", 8_030_261_248, 32, 8, ("r1-distill-llama-8b", "deepseek-r1:8b")),
    _distill("14b", "qwen", 14_770_033_664, 48, 8, ("r1-distill-qwen-14b", "deepseek-r1:14b")),
    _distill("32b", "qwen", 32_763_876_352, 64, 8, ("r1-distill-qwen-32b", "deepseek-r1:32b")),
    _distill("70b", "llama", 70_553_706_496, 80, 8, ("r1-distill-llama-70b", "deepseek-r1:70b")),
    ModelSpec(name="deepseek-v2-lite", hf_id="deepseek-ai/DeepSeek-V2-Lite",
              arch=Architecture(params=15_706_484_224, layers=27, kv_lora_rank=512, rope_dim=64),
              max_ctx=163_840, weights="bf16", aliases=("deepseek-v2-lite-chat",)),
    ModelSpec(name="deepseek-v3", hf_id="deepseek-ai/DeepSeek-V3", arch=_V3, max_ctx=163_840, weights="fp8",
              aliases=("deepseek-v3-base", "deepseek-v3-0324", "deepseek-v3.1")),
    ModelSpec(name="deepseek-r1", hf_id="deepseek-ai/DeepSeek-R1", arch=_V3, max_ctx=163_840, weights="fp8",
              aliases=("deepseek-r1-0528", "deepseek-r1-zero", "deepseek-r1:671b")),
)


def _key(name: str) -> str:
    return name.strip().lower().removeprefix("deepseek-ai/")


def find_model(name: str) -> ModelSpec:
    """A built-in model by its name, its Hugging Face id or an alias (any case)."""
    key = _key(name)
    for m in MODELS:
        if key in (m.name, _key(m.hf_id), *m.aliases):
            return m
    known = ", ".join(m.name for m in MODELS)
    raise UsageError(f"--model: unknown model {name!r}; built in: {known} "
                     "(or give --params, --layers, --kv-heads and --head-dim)")


@dataclass(frozen=True, slots=True)
class GpuFit:
    gpu_gib: float             # one card's size; a replica has `gpus` of them
    fits: bool                 # weights + KV for `concurrency` sequences of `ctx` tokens + margin
    weights_fit: bool          # the weights and their margin, without any KV cache
    max_concurrency: int       # sequences of `ctx` tokens that fit; 0 when even the weights do not
    max_ctx: int               # tokens per sequence at `concurrency` sequences (capped at the model's)
    headroom_gib: float        # one GPU − its share of the total; negative when it does not fit


@dataclass(frozen=True, slots=True)
class VramEstimate:
    model: str | None
    hf_id: str | None
    attention: str             # "mla" or "gqa" (standard attention, grouped or not)
    params: int
    quant: str
    kv_quant: str
    ctx: int
    concurrency: int
    margin_pct: float
    gpus: int                  # tensor-parallel GPUs per replica
    kv_formula: str
    kv_bytes_per_token: int
    kv_bytes_per_token_per_gpu: int
    weights_bytes: Fraction    # weights, KV cache and margin: the whole replica, over all its GPUs
    kv_cache_bytes: int
    margin_bytes: Fraction
    fits: tuple[GpuFit, ...]

    @property
    def total_bytes(self) -> Fraction:
        return self.weights_bytes + self.kv_cache_bytes + self.margin_bytes

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model, "hf_id": self.hf_id, "attention": self.attention, "params": self.params,
            "quant": self.quant, "kv_quant": self.kv_quant, "ctx": self.ctx, "concurrency": self.concurrency,
            "margin_pct": self.margin_pct, "gpus": self.gpus,
            "weights_gib": gib(self.weights_bytes), "kv_cache_gib": gib(self.kv_cache_bytes),
            "kv_bytes_per_token": self.kv_bytes_per_token, "margin_gib": gib(self.margin_bytes),
            "total_gib": gib(self.total_bytes), "per_gpu_gib": gib(self.total_bytes / self.gpus),
            "kv_bytes_per_token_per_gpu": self.kv_bytes_per_token_per_gpu,
            "fits": [asdict(f) for f in self.fits],
        }


def gib(n: Fraction | int) -> float:
    return float(Fraction(n) / GIB)


def weight_bytes(params: int, quant: str) -> Fraction:
    check_width(quant, WEIGHT_BYTES, "--quant")
    return params * WEIGHT_BYTES[quant]


def kv_bytes_per_token(arch: Architecture, kv_quant: str) -> int:
    check_width(kv_quant, KV_BYTES, "--kv-quant")
    return arch.kv_elements_per_token * KV_BYTES[kv_quant]


def check_width(name: str, table: dict[str, Any], option: str) -> None:
    if name not in table:
        raise UsageError(f"{option}: unknown width {name!r} (one of {', '.join(table)})")


def estimate(arch: Architecture, *, quant: str, kv_quant: str = "bf16", ctx: int, concurrency: int = 1,
             gpus_gib: tuple[Fraction, ...] = (), margin_pct: Fraction = Fraction(20), gpus: int = 1,
             model: ModelSpec | None = None) -> VramEstimate:
    """Weights, KV cache and margin for `concurrency` sequences of `ctx` tokens, and per GPU size
    whether they fit and how many sequences (at `ctx`) or tokens (at `concurrency`) would; with
    `gpus` > 1, on that many GPUs of each size in tensor parallel: each holds 1/gpus of the weights
    and its ranks' share of the KV cache."""
    weights = weight_bytes(arch.params, quant)
    per_token = kv_bytes_per_token(arch, kv_quant)
    per_token_gpu = arch.kv_elements_per_token_per_gpu(gpus) * KV_BYTES[kv_quant]
    kv_gpu = per_token_gpu * ctx * concurrency
    factor = 1 + margin_pct / 100
    need = (weights / gpus + kv_gpu) * factor          # on each GPU
    fits = []
    for size in gpus_gib:
        gpu = size * GIB
        room = gpu / factor - weights / gpus   # bytes left on each GPU for the KV cache, margin accounted for
        max_seqs = max(0, int(room // (per_token_gpu * ctx)))
        max_ctx = max(0, int(room // (per_token_gpu * concurrency)))
        if model is not None:
            max_ctx = min(max_ctx, model.max_ctx)
        fits.append(GpuFit(gpu_gib=float(size), fits=need <= gpu, weights_fit=room >= 0,
                           max_concurrency=max_seqs, max_ctx=max_ctx, headroom_gib=gib(gpu - need)))
    kv = kv_gpu * gpus
    return VramEstimate(
        model=model.name if model else None, hf_id=model.hf_id if model else None,
        attention="mla" if arch.mla else "gqa", params=arch.params, quant=quant, kv_quant=kv_quant, ctx=ctx,
        concurrency=concurrency, margin_pct=float(margin_pct), gpus=gpus,
        kv_formula=arch.formula(KV_BYTES[kv_quant]), kv_bytes_per_token=per_token,
        kv_bytes_per_token_per_gpu=per_token_gpu, weights_bytes=weights, kv_cache_bytes=kv,
        margin_bytes=(weights + kv) * margin_pct / 100, fits=tuple(fits))


def parse_gpus(text: str) -> tuple[Fraction, ...]:
    """`--gpu-gb 24,48,80` → sizes in GiB (exact decimals)."""
    sizes = []
    for part in text.split(","):
        try:
            size = Fraction(part.strip())
        except (ValueError, ZeroDivisionError):
            raise UsageError(f"--gpu-gb: {part.strip()!r} is not a number (sizes in GB, comma-separated, "
                             "e.g. 24,48,80)") from None
        if size <= 0:
            raise UsageError(f"--gpu-gb: sizes must be positive, got {part.strip()}")
        sizes.append(size)
    return tuple(sizes)


def custom_architecture(params_b: float | None, layers: int | None, kv_heads: int | None,
                        head_dim: int | None, kv_lora_rank: int | None, rope_dim: int | None
                        ) -> Architecture:
    """Any other model by its figures: standard attention needs --layers, --kv-heads and --head-dim;
    latent attention --layers, --kv-lora-rank and --rope-dim."""
    given = {"--params": params_b, "--layers": layers, "--kv-heads": kv_heads, "--head-dim": head_dim,
             "--kv-lora-rank": kv_lora_rank, "--rope-dim": rope_dim}
    for option, value in given.items():
        if value is not None and value <= 0:
            raise UsageError(f"{option}: must be positive, got {value:g}")
    if all(value is None for value in given.values()):
        raise UsageError("--model: required, or a model's figures (--params, --layers, --kv-heads and "
                         "--head-dim; --kv-lora-rank and --rope-dim for latent attention)")
    mla = kv_lora_rank is not None or rope_dim is not None
    attention = ("--kv-lora-rank", "--rope-dim") if mla else ("--kv-heads", "--head-dim")
    needed = ["--params", "--layers", *attention]
    missing = [o for o in needed if given[o] is None]
    if missing:
        raise UsageError(f"{missing[0]}: required without --model (give --model NAME, or --params, --layers "
                         "and --kv-heads/--head-dim, or --kv-lora-rank/--rope-dim for latent attention)")
    if mla and (kv_heads is not None or head_dim is not None):
        option = "--kv-heads" if kv_heads is not None else "--head-dim"
        raise UsageError(f"{option}: not with --kv-lora-rank/--rope-dim (latent attention caches one "
                         "latent per token and layer, not keys and values per head)")
    assert params_b is not None and layers is not None
    return Architecture(params=round(params_b * 1e9), layers=layers, kv_heads=kv_heads, head_dim=head_dim,
                        kv_lora_rank=kv_lora_rank, rope_dim=rope_dim)
